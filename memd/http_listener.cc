#include "memd/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tmcra::memd {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

// Where a connection is in its request cycle.
enum class Phase {
  kHandshake,  // TLS handshake in progress
  kIdle,       // waiting for the first byte of the next request (keep-alive)
  kHead,       // reading a request head
  kBody,       // reading a body
  kDiscard,    // dropping a body over the limit, then answering 413
  kQueued,     // a worker has the request: nothing is read
  kWrite,      // writing an answer
  kLinger,     // answered and closing: reading what the client still sends, then closing
};

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  std::string peer;
  Phase phase = Phase::kHead;
  std::string in;   // read, not yet consumed
  std::string out;  // to write
  size_t out_done = 0;
  HttpRequest request;     // the request being read
  uint64_t body_left = 0;  // kBody, kDiscard: bytes still to come
  std::optional<HttpResponse> after_discard;
  bool counted = false;      // a request begun before Stop(): the drain waits for it
  bool close_after = false;  // close once `out` is written
  bool head_request = false;
  bool client_close = false;  // the client asked to close after this request
  bool wants_write = false;   // the last TLS read or handshake needs the socket writable
  int served = 0;
  uint64_t linger_left = 0;
  Clock::time_point waiting_since;  // since when it has owed us a head (eviction order)
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point started;  // the request's head was complete
  std::string log_method;
  std::string log_path;
  uint32_t events = 0;  // registered with epoll (0: not registered)
};

// What one read or write on a connection came to.
enum class Io { kProgress, kWouldBlock, kClosed };

constexpr size_t kReadChunk = 16 * 1024;
constexpr uint64_t kLingerBytes = 256 * 1024;
constexpr auto kLingerTime = seconds(2);
constexpr auto kScanInterval = std::chrono::milliseconds(100);
constexpr int kListenBacklog = 511;
constexpr uint64_t kListenId = 0;           // epoll's tag for the listening socket
constexpr uint64_t kWakeId = ~uint64_t{0};  // and for the workers' wake-up

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// The numeric address of a peer, an IPv4-mapped IPv6 address as plain IPv4.
std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in4 = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in4.sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    }
  }
  return text;
}

// A second for every 16 KiB, for bodies and answers.
seconds SizeAllowance(uint64_t bytes) {
  return seconds(static_cast<int64_t>(std::min<uint64_t>(bytes, uint64_t{1} << 40) / 16384));
}

bool WaitsForHead(Phase p) { return p == Phase::kHandshake || p == Phase::kHead; }
bool IsIdle(Phase p) { return p == Phase::kIdle || p == Phase::kLinger; }

// Closes a connection with a reset: the peer's next write fails instead of filling buffers.
void ResetSocket(int fd) {
  const linger reset{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
}

// Raises the soft descriptor limit so that `wanted` descriptors fit (up to the hard limit).
void RaiseDescriptorLimit(rlim_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < wanted) {
    spdlog::warn("the descriptor limit ({}) is below --max-connections plus room for the store",
                 limit.rlim_cur);
  }
}

}  // namespace

struct HttpListener::Impl {
  ListenerOptions options;
  HttpApp& app;
  SSL_CTX* tls = nullptr;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;

  // Loop thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, int> per_address;
  uint64_t next_id = 1;
  int in_progress = 0;  // requests begun before Stop() and not yet answered
  bool listening = false;
  Clock::time_point accept_paused_until{};
  Clock::time_point last_scan{};
  Clock::time_point last_warning{};
  uint64_t unlogged_timeouts = 0;
  uint64_t unlogged_evictions = 0;
  bool draining = false;
  Clock::time_point drain_deadline{};

  std::atomic<bool> stop_requested{false};
  std::atomic<uint64_t> n_accepted{0}, n_evicted{0}, n_refused{0}, n_timed_out{0}, n_requests{0};

  // The workers.
  struct Job {
    uint64_t id = 0;
    HttpRequest request;
  };
  struct Done {
    uint64_t id = 0;
    HttpResponse response;
  };
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<Job> jobs;       // guarded by jobs_mu
  bool workers_stop = false;  // guarded by jobs_mu
  std::mutex done_mu;
  std::vector<Done> done;  // guarded by done_mu
  std::vector<std::thread> workers;

  Impl(ListenerOptions o, HttpApp& a) : options(std::move(o)), app(a) {}
  ~Impl();

  Result<SSL_CTX*> MakeTlsContext() const;
  Result<int> BindSocket();

  // The loop.
  void RunLoop();
  void WatchListener(bool on);
  bool Drained() const;
  void OnEvent(uint64_t id, uint32_t events);
  void AcceptAll(Clock::time_point now);
  bool MakeRoom(const std::string& peer);
  Conn* OldestWaiting(const std::string* peer);
  void ScanDeadlines(Clock::time_point now);
  void BeginDrain(Clock::time_point now);
  void WarnNow(Clock::time_point now);

  // One connection.
  void Progress(Conn& c);
  bool Handshake(Conn& c);
  Io ReadSome(Conn& c);
  Io WriteSome(Conn& c);
  void Advance(Conn& c);
  void HeadComplete(Conn& c, size_t head_length);
  void BodyComplete(Conn& c);
  void Refuse(Conn& c, int status, std::string_view code, std::string_view message);
  void Send(Conn& c, HttpResponse response);
  void Written(Conn& c);
  void BeginLinger(Conn& c);
  void Watch(Conn& c);
  void Close(Conn& c, bool reset);
  void FinishRequest(Conn& c);

  // Workers.
  void StartWorkers();
  void StopWorkers();
  void WorkerLoop();
  void TakeAnswers();
};

HttpListener::Impl::~Impl() {
  for (auto& [id, c] : conns) {
    if (c->ssl != nullptr) SSL_free(c->ssl);
    close(c->fd);
  }
  if (listen_fd >= 0) close(listen_fd);
  if (epoll_fd >= 0) close(epoll_fd);
  if (wake_fd >= 0) close(wake_fd);
  if (tls != nullptr) SSL_CTX_free(tls);
}

Result<SSL_CTX*> HttpListener::Impl::MakeTlsContext() const {
  struct stat st {};
  if (stat(options.tls_key_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    spdlog::warn("the TLS key file {} is readable by others (mode {:o}); chmod 600 it",
                 options.tls_key_file, st.st_mode & 0777);
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Error::Invalid("cannot set up TLS: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  std::string problem;
  if (SSL_CTX_use_certificate_chain_file(ctx, options.tls_cert_file.c_str()) != 1) {
    problem = "cannot load the TLS certificate " + options.tls_cert_file + ": " + OpenSslError();
  } else if (SSL_CTX_use_PrivateKey_file(ctx, options.tls_key_file.c_str(), SSL_FILETYPE_PEM) !=
             1) {
    problem = "cannot load the TLS key " + options.tls_key_file + ": " + OpenSslError();
  } else if (SSL_CTX_check_private_key(ctx) != 1) {
    problem = "the TLS key does not match the certificate: " + OpenSslError();
  }
  if (!problem.empty()) {
    SSL_CTX_free(ctx);
    return Error::Invalid(problem);
  }
  return ctx;
}

Result<int> HttpListener::Impl::BindSocket() {
  const ListenAddress& at = options.listen;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(at.port);
  const std::string where = at.Origin("tcp", at.port);
  if (getaddrinfo(at.host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return Error::Unavailable("cannot listen on " + where + ": not a numeric address");
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = errno;
  if (fd >= 0) {
    int yes = 1;  // SO_REUSEADDR only: SO_REUSEPORT would let a second server share the port
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, kListenBacklog) != 0) {
      err = errno;
      close(fd);
      freeaddrinfo(found);
      return Error::Unavailable("cannot listen on " + where + ": " + std::strerror(err));
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Error::Unavailable("cannot listen on " + where + ": " + std::strerror(err));
  listen_fd = fd;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
}

// ---- The loop ----------------------------------------------------------------------------

void HttpListener::Impl::RunLoop() {
  WatchListener(true);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  std::vector<epoll_event> events(256);
  for (;;) {
    const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 100);
    const auto now = Clock::now();
    for (size_t i = 0; i < static_cast<size_t>(std::max(n, 0)); ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        AcceptAll(now);
      } else if (id == kWakeId) {
        uint64_t count = 0;
        if (read(wake_fd, &count, sizeof count) < 0) count = 0;
        TakeAnswers();
      } else {
        OnEvent(id, events[i].events);
      }
    }
    if (now - last_scan >= kScanInterval) ScanDeadlines(now);
    if (stop_requested.load() && !draining) BeginDrain(now);
    if (draining && (Drained() || now >= drain_deadline)) break;
  }
  if (in_progress > 0) {
    spdlog::warn("stopping with {} request(s) unanswered after {} s", in_progress,
                 kDrainLimit.count());
  }
}

// Accepting is paused (the listening socket leaves epoll) while descriptors run out.
void HttpListener::Impl::WatchListener(bool on) {
  if (on == listening) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(epoll_fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listen_fd, &ev);
  listening = on;
}

// Every request begun before Stop() is answered, and no answer is still being written.
bool HttpListener::Impl::Drained() const {
  if (in_progress > 0) return false;
  return std::none_of(conns.begin(), conns.end(),
                      [](const auto& entry) { return entry.second->phase == Phase::kWrite; });
}

void HttpListener::Impl::OnEvent(uint64_t id, uint32_t events) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Conn& c = *it->second;
  if ((events & EPOLLERR) != 0) {
    Close(c, true);
    return;
  }
  Progress(c);
}

void HttpListener::Impl::AcceptAll(Clock::time_point now) {
  if (now < accept_paused_until) return;
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::warn("cannot accept a connection: {}; pausing for 100 ms", std::strerror(errno));
        accept_paused_until = now + std::chrono::milliseconds(100);
        WatchListener(false);
      }
      return;  // EAGAIN: all taken; ECONNABORTED and the like: the next event brings the rest
    }
    std::string peer = PeerAddress(addr);
    if (!MakeRoom(peer)) {
      ++n_refused;
      ResetSocket(fd);
      close(fd);
      continue;
    }
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Conn>();
    c->id = next_id++;
    c->fd = fd;
    c->peer = std::move(peer);
    c->waiting_since = now;
    c->deadline = now + seconds(options.head_timeout_seconds);
    if (tls != nullptr) {
      c->ssl = SSL_new(tls);
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
        spdlog::warn("cannot start TLS on a connection: {}", OpenSslError());
        if (c->ssl != nullptr) SSL_free(c->ssl);
        close(fd);
        continue;
      }
      SSL_set_accept_state(c->ssl);
      c->phase = Phase::kHandshake;
    }
    ++per_address[c->peer];
    ++n_accepted;
    Conn& ref = *c;
    conns.emplace(c->id, std::move(c));
    Watch(ref);
  }
}

// Room for one more connection from `peer`: false when none can be made.
bool HttpListener::Impl::MakeRoom(const std::string& peer) {
  const int per_cap = options.max_connections_per_address;
  if (per_cap > 0) {
    auto it = per_address.find(peer);
    if (it != per_address.end() && it->second >= per_cap) {
      Conn* victim = OldestWaiting(&peer);
      if (victim == nullptr) return false;
      ++n_evicted;
      ++unlogged_evictions;
      Close(*victim, true);
    }
  }
  if (conns.size() >= static_cast<size_t>(options.max_connections)) {
    Conn* victim = OldestWaiting(nullptr);
    if (victim == nullptr) return false;
    ++n_evicted;
    ++unlogged_evictions;
    Close(*victim, true);
  }
  return true;
}

// The connection (of `peer`, or any) that has waited longest for a head, a handshake or head in
// progress before an idle one; nullptr when every connection has a request in progress.
Conn* HttpListener::Impl::OldestWaiting(const std::string* peer) {
  Conn* slow = nullptr;
  Conn* idle = nullptr;
  for (auto& [id, c] : conns) {
    if (peer != nullptr && c->peer != *peer) continue;
    if (!WaitsForHead(c->phase) && !IsIdle(c->phase)) continue;
    Conn*& best = WaitsForHead(c->phase) ? slow : idle;
    if (best == nullptr || c->waiting_since < best->waiting_since) best = c.get();
  }
  return slow != nullptr ? slow : idle;
}

void HttpListener::Impl::ScanDeadlines(Clock::time_point now) {
  last_scan = now;
  std::vector<Conn*> expired;
  for (auto& [id, c] : conns) {
    if (c->deadline <= now) expired.push_back(c.get());
  }
  for (Conn* c : expired) {
    const bool slow = c->phase != Phase::kIdle && c->phase != Phase::kLinger;
    if (slow) {
      ++n_timed_out;
      ++unlogged_timeouts;
    }
    Close(*c, slow);
  }
  if (!listening && now >= accept_paused_until) WatchListener(true);
  WarnNow(now);
}

// One warning a second at most for what the scan and the caps closed.
void HttpListener::Impl::WarnNow(Clock::time_point now) {
  if (unlogged_timeouts + unlogged_evictions == 0 || now - last_warning < seconds(1)) return;
  last_warning = now;
  if (unlogged_timeouts > 0) {
    spdlog::warn(
        "closed {} connection(s) that took too long to send a request (head {} s, body "
        "{} s) or to take an answer",
        unlogged_timeouts, options.head_timeout_seconds, options.body_timeout_seconds);
  }
  if (unlogged_evictions > 0) {
    spdlog::warn(
        "closed {} connection(s) still waiting for a request head, to make room for "
        "new ones (--max-connections {}, --max-connections-per-address {})",
        unlogged_evictions, options.max_connections, options.max_connections_per_address);
  }
  unlogged_timeouts = 0;
  unlogged_evictions = 0;
}

void HttpListener::Impl::BeginDrain(Clock::time_point now) {
  draining = true;
  drain_deadline = now + kDrainLimit;
  std::vector<Conn*> idle;
  for (auto& [id, c] : conns) {
    if (c->phase == Phase::kIdle && c->in.empty()) idle.push_back(c.get());
  }
  for (Conn* c : idle) Close(*c, false);
}

// ---- One connection ------------------------------------------------------------------------

// Moves `c` on as far as its socket allows, then registers what it waits for.
void HttpListener::Impl::Progress(Conn& c) {
  const uint64_t id = c.id;
  if (c.phase == Phase::kHandshake && !Handshake(c)) return;
  if (c.phase == Phase::kWrite) {
    const Io io = WriteSome(c);
    if (io == Io::kClosed) return Close(c, true);
    if (c.out_done < c.out.size()) return Watch(c);
    Written(c);
    if (conns.count(id) == 0) return;
  }
  while (c.phase != Phase::kQueued && c.phase != Phase::kWrite && c.phase != Phase::kHandshake) {
    if (!c.out.empty() && c.out_done < c.out.size()) {  // "100 Continue"
      if (WriteSome(c) == Io::kClosed) return Close(c, true);
    }
    const Io io = ReadSome(c);
    if (io == Io::kClosed) {
      // The peer is gone: what it sent before is not answered.
      return Close(c, c.phase != Phase::kIdle && c.phase != Phase::kLinger);
    }
    Advance(c);
    if (conns.count(id) == 0) return;
    if (io == Io::kWouldBlock) break;
  }
  if (c.phase == Phase::kWrite && conns.count(id) != 0) return Progress(c);
  Watch(c);
}

// False when the connection is closed or the handshake waits for the socket.
bool HttpListener::Impl::Handshake(Conn& c) {
  ERR_clear_error();
  const int rc = SSL_do_handshake(c.ssl);
  if (rc == 1) {
    c.phase = Phase::kHead;
    c.wants_write = false;
    return true;
  }
  const int err = SSL_get_error(c.ssl, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    c.wants_write = err == SSL_ERROR_WANT_WRITE;
    Watch(c);
    return false;
  }
  ERR_clear_error();
  Close(c, true);  // not TLS, or a handshake that failed: nothing to answer
  return false;
}

Io HttpListener::Impl::ReadSome(Conn& c) {
  // How much is wanted: a head's worth, a body and the next head's worth, or anything to drop.
  size_t room = kReadChunk;
  if (c.phase == Phase::kHead || c.phase == Phase::kIdle) {
    if (c.in.size() > kMaxHeadBytes) return Io::kWouldBlock;
    room = std::min(room, kMaxHeadBytes + 1 - c.in.size());
  }
  char buf[kReadChunk];
  for (int round = 0; round < 8; ++round) {  // then others get a turn
    size_t got = 0;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int rc = SSL_read_ex(c.ssl, buf, room, &got);
      if (rc != 1) {
        const int err = SSL_get_error(c.ssl, rc);
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          c.wants_write = err == SSL_ERROR_WANT_WRITE;
          return Io::kWouldBlock;
        }
        return Io::kClosed;
      }
    } else {
      const ssize_t n = recv(c.fd, buf, room, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return Io::kWouldBlock;
      }
      if (n <= 0) return Io::kClosed;
      got = static_cast<size_t>(n);
    }
    c.wants_write = false;
    if (c.phase == Phase::kLinger) {
      c.linger_left -= std::min<uint64_t>(c.linger_left, got);
      if (c.linger_left == 0) return Io::kClosed;
      continue;
    }
    c.in.append(buf, got);
    if (c.phase == Phase::kHead || c.phase == Phase::kIdle) return Io::kProgress;
    if (c.phase == Phase::kBody && c.in.size() >= c.body_left) return Io::kProgress;
  }
  return Io::kProgress;
}

Io HttpListener::Impl::WriteSome(Conn& c) {
  while (c.out_done < c.out.size()) {
    const char* data = c.out.data() + c.out_done;
    const size_t left = c.out.size() - c.out_done;
    size_t wrote = 0;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int rc = SSL_write_ex(c.ssl, data, left, &wrote);
      if (rc != 1) {
        const int err = SSL_get_error(c.ssl, rc);
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) return Io::kWouldBlock;
        return Io::kClosed;
      }
    } else {
      const ssize_t n = send(c.fd, data, left, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return Io::kWouldBlock;
      }
      if (n <= 0) return Io::kClosed;
      wrote = static_cast<size_t>(n);
    }
    c.out_done += wrote;
  }
  c.out.clear();
  c.out_done = 0;
  return Io::kProgress;
}

// Acts on what has been read.
void HttpListener::Impl::Advance(Conn& c) {
  const auto now = Clock::now();
  if (c.phase == Phase::kIdle && !c.in.empty()) {
    c.phase = Phase::kHead;
    c.waiting_since = now;
    c.deadline = now + seconds(options.head_timeout_seconds);
  }
  if (c.phase == Phase::kHead) {
    const HeadParse head = ParseRequestHead(c.in, c.request);
    if (head.state == HeadState::kRefused) {
      c.log_method = LogSafe(c.request.method, 16);
      return Refuse(c, head.status,
                    head.status == 431   ? "request_header_fields_too_large"
                    : head.status == 414 ? "uri_too_long"
                    : head.status == 505 ? "http_version_not_supported"
                                         : "bad_request",
                    head.reason);
    }
    if (head.state == HeadState::kComplete) HeadComplete(c, head.length);
  }
  if (c.phase == Phase::kDiscard) {
    const uint64_t drop = std::min<uint64_t>(c.body_left, c.in.size());
    c.in.erase(0, drop);
    c.body_left -= drop;
    if (c.body_left == 0) {
      HttpResponse answer = std::move(*c.after_discard);
      c.after_discard.reset();
      Send(c, std::move(answer));
    }
    return;
  }
  if (c.phase == Phase::kBody && c.in.size() >= c.body_left) BodyComplete(c);
}

void HttpListener::Impl::HeadComplete(Conn& c, size_t head_length) {
  const auto now = Clock::now();
  c.in.erase(0, head_length);
  c.started = now;
  c.request.remote_addr = c.peer;
  c.request.body.clear();
  c.head_request = c.request.method == "HEAD";
  c.client_close = c.request.WantsClose();
  c.log_method = LogSafe(c.request.method, 16);
  c.log_path = LogSafe(std::string_view(c.request.target).substr(0, c.request.target.find('?')));
  if (!draining) {
    c.counted = true;
    ++in_progress;
  }
  const Framing framing = CheckFraming(c.request);
  if (framing.refuse_status != 0) {
    return Refuse(c, framing.refuse_status, framing.refuse_code, framing.refuse_message);
  }
  if (framing.body_bytes > options.max_body_bytes) {
    // Up to twice the limit the body is read and dropped, so that a client still sending it
    // reads the answer instead of a reset; beyond that the answer comes at once.
    if (framing.body_bytes > 2 * static_cast<uint64_t>(options.max_body_bytes) ||
        framing.expect_continue) {
      return Refuse(c, 413, "request_too_large", "");
    }
    c.after_discard = app.Refusal(c.request, 413, "request_too_large", "");
    c.after_discard->close = true;
    c.phase = Phase::kDiscard;
    c.body_left = framing.body_bytes;
    c.deadline = now + seconds(options.body_timeout_seconds) + SizeAllowance(c.body_left);
    return;
  }
  c.phase = Phase::kBody;
  c.body_left = framing.body_bytes;
  c.deadline = now + seconds(options.body_timeout_seconds) + SizeAllowance(c.body_left);
  if (framing.expect_continue && c.in.size() < c.body_left) {
    c.out = "HTTP/1.1 100 Continue\r\n\r\n";
    c.out_done = 0;
  }
}

void HttpListener::Impl::BodyComplete(Conn& c) {
  c.request.body.assign(c.in, 0, c.body_left);
  c.in.erase(0, c.body_left);
  c.body_left = 0;
  c.deadline = Clock::time_point::max();  // our time, not the client's
  if (!c.counted) {                       // arrived after Stop()
    HttpResponse answer = app.Refusal(c.request, 503, "unavailable", "shutting down");
    answer.close = true;
    return Send(c, std::move(answer));
  }
  c.phase = Phase::kQueued;
  Watch(c);
  {
    std::lock_guard lock(jobs_mu);
    jobs.push_back(Job{c.id, std::move(c.request)});
  }
  jobs_cv.notify_one();
  c.request = HttpRequest{};
}

// Answers at once and closes: what is left of the request is not read as a request.
void HttpListener::Impl::Refuse(Conn& c, int status, std::string_view code,
                                std::string_view message) {
  if (c.started == Clock::time_point{}) c.started = Clock::now();
  c.request.remote_addr = c.peer;
  HttpResponse answer = app.Refusal(c.request, status, code, message);
  answer.close = true;
  Send(c, std::move(answer));
}

void HttpListener::Impl::Send(Conn& c, HttpResponse response) {
  const bool keep_alive = !response.close && !c.client_close && !draining &&
                          c.served + 1 < options.max_requests_per_connection;
  c.close_after = !keep_alive;
  std::string unsent = c.out.substr(std::min(c.out_done, c.out.size()));  // a "100 Continue"
  c.out = std::move(unsent) + ResponseHead(response, keep_alive, options.keep_alive_seconds);
  if (!c.head_request) c.out += response.body;
  c.out_done = 0;
  c.phase = Phase::kWrite;
  c.deadline = Clock::now() + seconds(options.write_timeout_seconds) + SizeAllowance(c.out.size());
  const auto ms = std::chrono::duration<double, std::milli>(Clock::now() - c.started).count();
  spdlog::info("{} {} {} {} {:.1f} ms{}", response.request_id,
               c.log_method.empty() ? "-" : c.log_method, c.log_path.empty() ? "-" : c.log_path,
               response.status, ms, response.log_note);
}

// The answer is written: the next request, or the close.
void HttpListener::Impl::Written(Conn& c) {
  ++n_requests;
  ++c.served;
  FinishRequest(c);
  if (c.close_after) return BeginLinger(c);
  const auto now = Clock::now();
  c.phase = Phase::kIdle;
  c.request = HttpRequest{};
  c.head_request = false;
  c.client_close = false;
  c.started = {};
  c.log_method.clear();
  c.log_path.clear();
  c.waiting_since = now;
  c.deadline = now + seconds(options.keep_alive_seconds);
}

// Closes our side and reads (and drops) what the client still sends for a while, so that the
// answer is not lost to a reset caused by unread bytes.
void HttpListener::Impl::BeginLinger(Conn& c) {
  if (c.ssl != nullptr) {
    ERR_clear_error();
    SSL_shutdown(c.ssl);  // close_notify, best effort
    ERR_clear_error();
  }
  shutdown(c.fd, SHUT_WR);
  c.phase = Phase::kLinger;
  c.in.clear();
  c.linger_left = kLingerBytes;
  c.waiting_since = Clock::now();
  c.deadline = c.waiting_since + kLingerTime;
}

void HttpListener::Impl::FinishRequest(Conn& c) {
  if (c.counted) {
    c.counted = false;
    --in_progress;
  }
}

// Registers the events `c` waits for (none while a worker has its request: a peer that hangs
// up meanwhile is seen when the answer is written).
void HttpListener::Impl::Watch(Conn& c) {
  uint32_t want = 0;
  switch (c.phase) {
    case Phase::kQueued:
      want = 0;
      break;
    case Phase::kWrite:
      want = EPOLLOUT;
      break;
    case Phase::kHandshake:
      want = c.wants_write ? EPOLLOUT : EPOLLIN;
      break;
    default:
      want = EPOLLIN;
      if (c.wants_write || c.out_done < c.out.size()) want |= EPOLLOUT;
      break;
  }
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (want == 0) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, &ev);
  } else {
    epoll_ctl(epoll_fd, c.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
  }
  c.events = want;
}

void HttpListener::Impl::Close(Conn& c, bool reset) {
  FinishRequest(c);
  if (c.events != 0) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  if (reset) ResetSocket(c.fd);
  if (c.ssl != nullptr) SSL_free(c.ssl);
  close(c.fd);
  auto it = per_address.find(c.peer);
  if (it != per_address.end() && --it->second <= 0) per_address.erase(it);
  conns.erase(c.id);  // `c` is gone
}

// ---- Workers -----------------------------------------------------------------------------

void HttpListener::Impl::StartWorkers() {
  const int n = std::max(1, options.workers);
  for (int i = 0; i < n; ++i) workers.emplace_back([this] { WorkerLoop(); });
}

void HttpListener::Impl::StopWorkers() {
  {
    std::lock_guard lock(jobs_mu);
    workers_stop = true;
    jobs.clear();
  }
  jobs_cv.notify_all();
  for (auto& t : workers) t.join();
  workers.clear();
}

void HttpListener::Impl::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(jobs_mu);
      jobs_cv.wait(lock, [&] { return workers_stop || !jobs.empty(); });
      if (workers_stop) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    HttpResponse answer;
    try {
      answer = app.Answer(job.request);
    } catch (const std::exception& e) {
      spdlog::error("unhandled exception answering a request: {}", e.what());
      answer = app.Refusal(job.request, 500, "internal_error", "internal error");
    } catch (...) {
      spdlog::error("unhandled exception answering a request");
      answer = app.Refusal(job.request, 500, "internal_error", "internal error");
    }
    {
      std::lock_guard lock(done_mu);
      done.push_back(Done{job.id, std::move(answer)});
    }
    const uint64_t one = 1;
    if (write(wake_fd, &one, sizeof one) < 0) {
      // The counter cannot overflow here; a failed wake is caught by the loop's next turn.
    }
  }
}

// Hands the workers' answers to their connections (a connection closed meanwhile drops its).
void HttpListener::Impl::TakeAnswers() {
  std::vector<Done> ready;
  {
    std::lock_guard lock(done_mu);
    ready.swap(done);
  }
  for (auto& d : ready) {
    auto it = conns.find(d.id);
    if (it == conns.end()) continue;
    Conn& c = *it->second;
    Send(c, std::move(d.response));
    Progress(c);
  }
}

// ---- HttpListener --------------------------------------------------------------------------

HttpListener::HttpListener(ListenerOptions options, HttpApp& app)
    : impl_(std::make_unique<Impl>(std::move(options), app)) {}

HttpListener::~HttpListener() = default;

bool HttpListener::tls() const { return !impl_->options.tls_cert_file.empty(); }

Result<int> HttpListener::Bind() {
  const ListenerOptions& o = impl_->options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Error::Invalid("--tls-cert and --tls-key go together");
  }
  if (!o.tls_cert_file.empty()) {
    auto ctx = impl_->MakeTlsContext();
    if (!ctx) return ctx.error();
    impl_->tls = *ctx;
  }
  RaiseDescriptorLimit(static_cast<rlim_t>(o.max_connections) + 256);
  impl_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0) {
    return Error::Unavailable(std::string("cannot make the event loop: ") + std::strerror(errno));
  }
  return impl_->BindSocket();
}

Status HttpListener::Serve() {
  if (impl_->listen_fd < 0) return Error::Internal("Serve before Bind");
  impl_->StartWorkers();
  impl_->RunLoop();
  impl_->StopWorkers();
  return Ok();
}

void HttpListener::Stop() {
  impl_->stop_requested = true;
  const uint64_t one = 1;
  if (impl_->wake_fd >= 0 && write(impl_->wake_fd, &one, sizeof one) < 0) {
    // The loop sees the flag at its next turn (at most 100 ms).
  }
}

ListenerStats HttpListener::stats() const {
  return ListenerStats{impl_->n_accepted.load(), impl_->n_evicted.load(), impl_->n_refused.load(),
                       impl_->n_timed_out.load(), impl_->n_requests.load()};
}

}  // namespace tmcra::memd
