#include "src/mcp/server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "src/mcp/line_reader.h"
#include "src/mcp/schema.h"

namespace tmcra::mcp {

namespace {

using namespace std::chrono_literals;

// Self-pipe for termination signals: the handler writes a byte, Run() polls the read end.
int g_signal_read_fd = -1;
int g_signal_write_fd = -1;

extern "C" void OnTerminationSignal(int /*signo*/) {
  const int saved_errno = errno;
  if (g_signal_write_fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t ignored = write(g_signal_write_fd, &byte, 1);
  }
  errno = saved_errno;
}

constexpr auto kShutdownGrace = 500ms;   // in-flight calls may finish on their own
constexpr auto kShutdownCancel = 400ms;  // then they are cancelled and get this long to stop

// True on the thread in ReaderLoop while it hands a chunk of input to HandleLine: the first
// tools/call of the chunk is then left in next_call_ for that thread to answer.
thread_local bool t_reading = false;

struct ReadingFlag {
  ReadingFlag() { t_reading = true; }
  ~ReadingFlag() { t_reading = false; }
  ReadingFlag(const ReadingFlag&) = delete;
  ReadingFlag& operator=(const ReadingFlag&) = delete;
};

}  // namespace

struct Server::Call {
  std::atomic<bool> client_cancelled{false};
  json progress_token;  // params._meta.progressToken (a string or an integer), else null
};

struct Server::Pending {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<json> response;
};

class Server::CallContext final : public ToolContext {
 public:
  CallContext(Server& server, std::shared_ptr<Call> call, std::string version)
      : server_(server), call_(std::move(call)), version_(std::move(version)) {}

  std::string protocol_version() const override { return version_; }
  bool cancelled() const override {
    return call_->client_cancelled.load() || server_.shutting_down_.load();
  }
  bool can_elicit() const override {
    std::lock_guard lock(server_.state_mu_);
    return server_.client_elicitation_ && version_ >= "2025-06-18" &&
           !server_.options_.inline_tools;
  }
  Result<ElicitResponse> Elicit(const std::string& message, const json& requested_schema,
                                std::chrono::milliseconds timeout) override {
    if (!can_elicit()) {
      return Error::Unavailable("the client did not declare the elicitation capability");
    }
    return server_.Elicit(*call_, message, requested_schema, timeout);
  }
  void Progress(double progress, double total, const std::string& message) override {
    if (call_->progress_token.is_null() || cancelled()) return;
    json params{{"progressToken", call_->progress_token}, {"progress", progress}};
    if (total > 0) params["total"] = total;
    if (!message.empty() && version_ >= "2025-03-26") params["message"] = message;
    (void)server_.Write(
        json{{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", params}});
  }

 private:
  Server& server_;
  std::shared_ptr<Call> call_;
  std::string version_;
};

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() {
  shutting_down_ = true;
  StopWorkers();
  for (int fd : {handoff_timer_fd_, standby_wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void Server::InstallSignalHandlers() {
  int fds[2];
  if (g_signal_read_fd < 0 && pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    g_signal_read_fd = fds[0];
    g_signal_write_fd = fds[1];
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);  // the host's terminal or session went away
  std::signal(SIGPIPE, SIG_IGN);
}

bool Server::InitializeAnswered() const {
  std::lock_guard lock(state_mu_);
  return !negotiated_.empty();
}

std::string Server::negotiated_version() const {
  std::lock_guard lock(state_mu_);
  return negotiated_.empty() ? std::string(kNewestVersion) : negotiated_;
}

void Server::SetOutputForTest(int out_fd) { out_fd_ = out_fd; }

void Server::WidenOutputPipe(int out_fd) {
  struct stat st {};
  if (fstat(out_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;  // a socket (Node hosts), a file
  const int before = fcntl(out_fd, F_GETPIPE_SZ);
  for (const int bytes : {kOutputPipeBytes, kOutputPipeBytes / 2}) {
    if (before >= bytes) return;
    if (fcntl(out_fd, F_SETPIPE_SZ, bytes) >= 0) {
      spdlog::debug("stdout is a pipe of {} bytes; widened to {}", before, bytes);
      return;
    }
  }
  spdlog::debug("stdout is a pipe of {} bytes; cannot widen it: {}", before, std::strerror(errno));
}

void Server::HandleLineForTest(std::string_view line, bool oversized) {
  HandleLine(line, oversized);
}

int Server::Run(int in_fd, int out_fd) {
  // Checked before any descriptor of ours is made: one could take a closed input's number.
  if (fcntl(in_fd, F_GETFD) < 0) {
    spdlog::error("stdin is not an open file");
    return 1;
  }
  out_fd_ = out_fd;
  in_fd_ = in_fd;
  WidenOutputPipe(out_fd);
  reading_done_ = false;
  reading_failed_ = false;
  // The input is read on a pooled thread, which answers a tools/call it reads itself; a standby
  // thread takes the reading over when such a call runs long (ReadUntilCall). This thread only
  // waits for the input to end.
  StartWorker([this] { ReaderLoop(); });
  StartStandby();  // after the reader: a standby that got the only thread would block it
  {
    std::unique_lock lock(reading_mu_);
    reading_cv_.wait(lock, [this] { return reading_done_; });
  }
  if (output_broken_.load()) spdlog::info("output closed; shutting down");
  Shutdown();
  return reading_failed_ ? 1 : 0;
}

void Server::ReaderLoop() {
  std::function<void()> call;
  ReadEnd end = ReadEnd::kFailed;
  try {
    end = ReadUntilCall(call);
  } catch (const std::exception& e) {
    spdlog::error("reading the input failed: {}", e.what());
  } catch (...) {
    spdlog::error("reading the input failed with an unknown exception");
  }
  if (end != ReadEnd::kHandedOn) {
    // The input is over (or reading failed): Run() shuts down. A call read just before still
    // gets its answer, within the shutdown's grace.
    if (!call && next_call_) call = std::move(next_call_);
    next_call_ = nullptr;
    {
      std::lock_guard lock(reading_mu_);
      reading_done_ = true;
      reading_failed_ = end == ReadEnd::kFailed;
    }
    reading_cv_.notify_all();
  }
  if (call) call();
}

Server::ReadEnd Server::ReadUntilCall(std::function<void()>& call) {
  const LineReader::LineFn on_line = [this](std::string_view line, bool oversized) {
    HandleLine(line, oversized);
  };
  read_buffer_.resize(64 * 1024);
  while (!output_broken_.load()) {
    pollfd fds[2] = {{in_fd_, POLLIN, 0}, {g_signal_read_fd, POLLIN, 0}};
    const nfds_t count = g_signal_read_fd >= 0 ? 2 : 1;
    const int ready = poll(fds, count, 250);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll on stdin failed: {}", std::strerror(errno));
      return ReadEnd::kFailed;
    }
    if (ready == 0) continue;
    if (count == 2 && (fds[1].revents & POLLIN) != 0) {
      spdlog::info("termination signal received; shutting down");
      return ReadEnd::kEnded;
    }
    if ((fds[0].revents & POLLNVAL) != 0) {
      spdlog::error("stdin is not an open file");
      return ReadEnd::kFailed;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(in_fd_, read_buffer_.data(), read_buffer_.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      spdlog::error("reading stdin failed: {}", std::strerror(errno));
      return ReadEnd::kFailed;
    }
    if (n == 0) {
      line_reader_.Finish(on_line);
      spdlog::debug("end of input; shutting down");
      return ReadEnd::kEnded;
    }
    {
      const ReadingFlag reading;
      line_reader_.Feed(std::string_view(read_buffer_.data(), static_cast<size_t>(n)), on_line);
    }
    if (next_call_) {
      call = std::move(next_call_);
      next_call_ = nullptr;
      // This thread answers the call at once instead of waiting for a thread to wake for it,
      // and goes on reading afterwards unless the call outlasted the hand-off delay: then the
      // standby has taken the reading over meanwhile. A short call wakes no other thread.
      if (const auto inline_call = AnswerWithStandby(call); inline_call.has_value()) {
        if (*inline_call) continue;
        return ReadEnd::kHandedOn;  // `call` has run
      }
      // No standby: another pooled thread goes on reading (its wake-up overlaps the call).
      try {
        StartWorker([this] { ReaderLoop(); });
        return ReadEnd::kHandedOn;
      } catch (const std::exception& e) {
        // Nothing queued (out of memory): answer here, then read on. Nobody reads meanwhile,
        // so this call cannot be cancelled and an elicitation in it waits for its timeout.
        spdlog::warn("could not hand the reading to another thread: {}", e.what());
        std::exchange(call, nullptr)();
      }
    }
  }
  return ReadEnd::kEnded;  // the output is gone
}

void Server::StartStandby() {
  if (options_.hand_off_delay <= std::chrono::microseconds::zero()) return;
  if (handoff_timer_fd_ < 0 || standby_wake_fd_ < 0) {
    const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    const int wake = timer < 0 ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake < 0) {
      spdlog::warn("no timer for handing the reading on ({}); every call wakes a thread",
                   std::strerror(errno));
      if (timer >= 0) close(timer);
      return;
    }
    handoff_timer_fd_ = timer;
    standby_wake_fd_ = wake;
  }
  // Set first: a standby whose poll fails at once clears it, and that must stand.
  standby_ready_ = true;
  try {
    StartWorker([this] { StandbyLoop(); });
  } catch (const std::exception& e) {
    standby_ready_ = false;
    spdlog::warn("could not start the standby reader: {}; every call wakes a thread", e.what());
  }
}

bool Server::ArmHandOff(bool arm) const {
  itimerspec spec{};
  if (arm) {
    const auto delay = options_.hand_off_delay;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(delay);
    spec.it_value.tv_sec = static_cast<time_t>(seconds.count());
    spec.it_value.tv_nsec = static_cast<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(delay - seconds).count());
  }
  return timerfd_settime(handoff_timer_fd_, 0, &spec, nullptr) == 0;
}

namespace {

void RunLogged(std::function<void()>& call) {
  try {
    std::exchange(call, nullptr)();
  } catch (const std::exception& e) {
    spdlog::error("worker failed: {}", e.what());
  } catch (...) {
    spdlog::error("worker failed with an unknown exception");
  }
}

}  // namespace

std::optional<bool> Server::AnswerWithStandby(std::function<void()>& call) {
  if (!standby_ready_.load() || standby_stop_.load()) return std::nullopt;
  // Mark the turn as answering before the timer can fire, so that the standby finds it so.
  const uint64_t answering = reading_turn_.load(std::memory_order_relaxed) | 1;
  reading_turn_.store(answering, std::memory_order_release);
  if (!ArmHandOff(true)) {
    uint64_t expected = answering;
    if (reading_turn_.compare_exchange_strong(expected, answering - 1, std::memory_order_acq_rel)) {
      return std::nullopt;  // the caller hands the reading on at once
    }
    // A late expiry let the standby take the reading over already: this thread only answers.
    RunLogged(call);
    return false;
  }
  RunLogged(call);
  // Back to reading, unless the standby has moved the turn on: then another thread reads, and
  // the timer is its own (disarming it here could leave its call without a standby).
  uint64_t expected = answering;
  if (!reading_turn_.compare_exchange_strong(expected, answering - 1, std::memory_order_acq_rel)) {
    return false;
  }
  ArmHandOff(false);  // a late expiry finds the turn even: the standby lets it be
  return true;
}

void Server::StandbyLoop() {
  for (;;) {
    pollfd fds[2] = {{handoff_timer_fd_, POLLIN, 0}, {standby_wake_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, -1);
    if (standby_stop_.load()) return;
    if (ready < 0 && errno == EINTR) continue;
    uint64_t turn = reading_turn_.load(std::memory_order_acquire);
    if (ready < 0) {
      // Without a standby, calls go back to waking a thread each (the reader checks this flag);
      // a call being answered right now would have nobody to take over, so take over at once.
      standby_ready_ = false;
      spdlog::error("the standby reader's poll failed: {}", std::strerror(errno));
      if ((turn & 1) != 0 &&
          reading_turn_.compare_exchange_strong(turn, turn + 1, std::memory_order_acq_rel)) {
        ReaderLoop();
      }
      return;
    }
    uint64_t expirations = 0;
    [[maybe_unused]] const ssize_t cleared =
        read(handoff_timer_fd_, &expirations, sizeof expirations);
    turn = reading_turn_.load(std::memory_order_acquire);
    // A timer that fired as the reader came back finds the turn even: nothing to take over.
    if ((turn & 1) == 0) continue;
    if (!reading_turn_.compare_exchange_strong(turn, turn + 1, std::memory_order_acq_rel)) {
      continue;
    }
    // This thread reads now (the reading thread's call goes on); another one stands by.
    StartStandby();
    ReaderLoop();
    return;
  }
}

void Server::Shutdown() {
  {
    std::unique_lock lock(calls_mu_);
    calls_cv_.wait_for(lock, kShutdownGrace, [this] { return calls_.empty(); });
  }
  shutting_down_ = true;
  bool stragglers = false;
  {
    std::unique_lock lock(calls_mu_);
    stragglers = !calls_cv_.wait_for(lock, kShutdownCancel, [this] { return calls_.empty(); });
  }
  if (stragglers) {
    // A tool that ignores cancellation must not keep the host waiting: every write we make is
    // transactional, so leaving now loses nothing that was acknowledged.
    spdlog::warn("tool calls still running at shutdown; exiting without them");
    spdlog::default_logger()->flush();
    std::_Exit(reading_failed_ ? 1 : 0);
  }
  StopWorkers();
}

void Server::StartWorker(std::function<void()> work) {
  std::lock_guard lock(pool_mu_);
  tasks_.push_back(std::move(work));  // may throw (out of memory): then nothing is queued
  if (idle_ < tasks_.size()) {
    try {
      threads_.emplace_back([this] { PoolLoop(); });
    } catch (const std::exception& e) {
      if (threads_.empty()) {
        tasks_.pop_back();  // no thread would ever run it
        throw;
      }
      // Queued all the same: it runs when a busy thread is free.
      spdlog::error("could not start a thread: {}", e.what());
    }
  }
  pool_cv_.notify_one();
}

void Server::PoolLoop() {
  std::unique_lock lock(pool_mu_);
  for (;;) {
    ++idle_;
    pool_cv_.wait(lock, [this] { return pool_stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> work = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      work();
    } catch (const std::exception& e) {
      spdlog::error("worker failed: {}", e.what());
    } catch (...) {
      spdlog::error("worker failed with an unknown exception");
    }
    lock.lock();
  }
}

void Server::StopWorkers() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(pool_mu_);
    pool_stopping_ = true;
    threads.swap(threads_);
  }
  standby_stop_ = true;
  if (standby_wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t woken = write(standby_wake_fd_, &one, sizeof one);
  }
  pool_cv_.notify_all();
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

bool Server::Write(const json& message) { return WriteLine(Serialize(message)); }

bool Server::WriteLine(std::string line) {
  line.push_back('\n');
  std::lock_guard lock(out_mu_);
  if (output_broken_.load() || out_fd_ < 0) return false;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(out_fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      output_broken_ = true;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void Server::HandleLine(std::string_view line, bool oversized) {
  if (oversized) {
    Write(MakeError(nullptr, rpc::kInvalidRequest, "Message exceeds the 8 MiB limit"));
    return;
  }
  try {
    ParsedLine parsed = ParseLine(line);
    if (parsed.error_code != 0) {
      Write(MakeError(nullptr, parsed.error_code, parsed.error_message));
      return;
    }
    if (parsed.value.is_array()) {
      HandleBatch(parsed.value, parsed.number_paths);
      return;
    }
    const json* bad_number = parsed.number_out_of_range ? &parsed.number_paths.front() : nullptr;
    if (auto response = HandleMessage(parsed.value, /*in_batch=*/false, bad_number)) {
      Write(*response);
    }
  } catch (const std::exception& e) {
    spdlog::error("request failed: {}", e.what());
    Write(MakeError(nullptr, rpc::kInternalError, "Internal error"));
  }
}

void Server::HandleBatch(const json& batch, const std::vector<json>& number_paths) {
  std::string version;
  {
    std::lock_guard lock(state_mu_);
    version = negotiated_;
  }
  if (version != "2025-03-26") {
    Write(MakeError(nullptr, rpc::kInvalidRequest,
                    "Invalid Request: batches are accepted only on protocol version 2025-03-26"));
    return;
  }
  if (batch.empty()) {
    Write(MakeError(nullptr, rpc::kInvalidRequest, "Invalid Request: empty batch"));
    return;
  }
  // Tool calls in a batch run one after another on a worker, so an elicitation inside one can
  // still be answered through the reader.
  // Each message's own number out of range, if any, at its path from the message.
  std::vector<json> bad_numbers(batch.size());
  for (const auto& path : number_paths) {
    if (path.empty() || !path[0].is_number_unsigned()) continue;
    const size_t index = path[0].get<size_t>();
    if (index < bad_numbers.size()) bad_numbers[index] = json(path.begin() + 1, path.end());
  }
  auto run = [this, batch, bad_numbers] {
    json responses = json::array();
    for (size_t i = 0; i < batch.size(); ++i) {
      const json* bad_number = bad_numbers[i].is_array() ? &bad_numbers[i] : nullptr;
      if (auto response = HandleMessage(batch[i], /*in_batch=*/true, bad_number)) {
        responses.push_back(std::move(*response));
      }
    }
    if (!responses.empty()) Write(responses);
  };
  if (options_.inline_tools) {
    run();
  } else {
    StartWorker(std::move(run));
  }
}

std::optional<json> Server::HandleMessage(const json& message, bool in_batch,
                                          const json* bad_number) {
  // Where a number no double holds was, as text ("params.x"), for the messages that refuse it.
  const auto out_of_range = [bad_number](const char* what) {
    return std::string(what) + PathText("", *bad_number) + (bad_number->empty() ? "" : ": ") +
           "number out of range";
  };
  if (!message.is_object()) {
    if (bad_number != nullptr) {
      return MakeError(nullptr, rpc::kInvalidRequest, out_of_range("Invalid Request: "));
    }
    return MakeError(nullptr, rpc::kInvalidRequest, "Invalid Request: expected a JSON object");
  }
  const auto id_it = message.find("id");
  const bool has_id = id_it != message.end();
  const json id = has_id && IsValidRequestId(*id_it) ? *id_it : json(nullptr);
  const auto method_it = message.find("method");
  if (method_it == message.end()) {
    if (has_id && (message.contains("result") || message.contains("error"))) {
      // A response we cannot read whole is an error response to our request.
      HandleResponse(bad_number == nullptr ? message
                                           : MakeError(*id_it, rpc::kInvalidParams,
                                                       out_of_range("Invalid params: ")));
      return std::nullopt;
    }
    return MakeError(id, rpc::kInvalidRequest, "Invalid Request: no method");
  }
  const auto version_it = message.find("jsonrpc");
  const bool good_envelope =
      version_it != message.end() && *version_it == "2.0" && method_it->is_string();
  if (!has_id) {
    // A notification is never answered, even when it is malformed or unknown; one that cannot
    // be read whole is not acted on.
    if (good_envelope && bad_number == nullptr) {
      const auto params = message.find("params");
      HandleNotification(method_it->get<std::string>(),
                         params != message.end() ? *params : json::object());
    }
    return std::nullopt;
  }
  if (!good_envelope) {
    return MakeError(id, rpc::kInvalidRequest,
                     "Invalid Request: jsonrpc must be \"2.0\" and method a string");
  }
  if (bad_number != nullptr && (bad_number->empty() || (*bad_number)[0] != "params")) {
    // In the envelope: the id, when it is that number, cannot be read.
    return MakeError(id, rpc::kInvalidRequest, out_of_range("Invalid Request: "));
  }
  if (!IsValidRequestId(*id_it)) {
    return MakeError(nullptr, rpc::kInvalidRequest,
                     "Invalid Request: id must be a string or an integer");
  }
  const auto params_it = message.find("params");
  const json params = params_it != message.end() ? *params_it : json::object();
  return HandleRequest(id, method_it->get<std::string>(), params, in_batch, bad_number);
}

json Server::RefuseNumberOutOfRange(const json& id, const std::string& method, const json& params,
                                    const json& path) const {
  const auto name = params.is_object() ? params.find("name") : params.end();
  if (method == "tools/call" && path.size() >= 2 && path[1] == "arguments" &&
      name != params.end() && name->is_string()) {
    const std::string& tool = name->get_ref<const std::string&>();
    if (tools_.Find(tool) == nullptr) {
      return MakeError(id, rpc::kInvalidParams, "Unknown tool: " + tool);
    }
    // As for any invalid argument: a tool error naming the field, so the model can correct it.
    return MakeResult(id, ToolSet::Shape(ToolResult::Fail("Invalid arguments for " + tool + ": " +
                                                          PathText("arguments", path, 2) +
                                                          ": number out of range"),
                                         negotiated_version()));
  }
  return MakeError(id, rpc::kInvalidParams,
                   "Invalid params: " + PathText("", path) + ": number out of range");
}

std::optional<json> Server::HandleRequest(const json& id, const std::string& method,
                                          const json& params, bool in_batch,
                                          const json* bad_number) {
  // The lifecycle: until initialize is answered, only ping and initialize are served (and
  // server/discover and unknown methods answered -32601 below, as at any time).
  if ((method == "tools/list" || method == "tools/call") && !InitializeAnswered()) {
    return MakeError(id, rpc::kInvalidRequest,
                     "Invalid Request: the session is not initialized; send initialize first");
  }
  if (bad_number != nullptr && (method == "ping" || method == "initialize" ||
                                method == "tools/list" || method == "tools/call")) {
    return RefuseNumberOutOfRange(id, method, params, *bad_number);
  }
  if (method == "ping") return MakeResult(id, json::object());
  if (method == "initialize") {
    if (in_batch) {
      return MakeError(id, rpc::kInvalidRequest,
                       "Invalid Request: initialize must not be part of a batch");
    }
    if (!params.is_object() || !params.contains("protocolVersion") ||
        !params["protocolVersion"].is_string()) {
      return MakeError(id, rpc::kInvalidParams,
                       "Invalid params: params.protocolVersion must be a string");
    }
    {
      std::lock_guard lock(state_mu_);
      if (!negotiated_.empty()) {
        return MakeError(id, rpc::kInvalidRequest, "Invalid Request: already initialized");
      }
    }
    return MakeResult(id, Initialize(params));
  }
  if (method == "tools/list") {
    if (!params.is_object()) {
      return MakeError(id, rpc::kInvalidParams, "Invalid params: params must be an object");
    }
    return ListTools(id, params);
  }
  if (method == "tools/call") {
    if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
      return MakeError(id, rpc::kInvalidParams, "Invalid params: params.name must be a string");
    }
    const std::string& name = params["name"].get_ref<const std::string&>();
    if (tools_.Find(name) == nullptr) {
      return MakeError(id, rpc::kInvalidParams, "Unknown tool: " + name);
    }
    const std::string key = id.dump();
    auto call = std::make_shared<Call>();
    if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
      auto token = meta->find("progressToken");
      if (token != meta->end() && (token->is_string() || token->is_number_integer())) {
        call->progress_token = *token;
      }
    }
    {
      std::lock_guard lock(calls_mu_);
      if (!calls_.emplace(key, call).second) {
        return MakeError(id, rpc::kInvalidRequest,
                         "Invalid Request: a call with this id is still running");
      }
    }
    const auto finish = [this, key] {
      std::lock_guard lock(calls_mu_);
      calls_.erase(key);
      calls_cv_.notify_all();
    };
    if (in_batch || options_.inline_tools) {
      auto response = RunCall(id, params, call);
      finish();
      return response;
    }
    auto work = [this, id, params, call, finish] { RunCallAndWrite(id, params, call, finish); };
    if (t_reading && !next_call_) {
      next_call_ = std::move(work);  // the reading thread answers it (ReadUntilCall)
    } else {
      StartWorker(std::move(work));
    }
    return std::nullopt;
  }
  return MakeError(id, rpc::kMethodNotFound, "Method not found: " + method);
}

void Server::HandleNotification(const std::string& method, const json& params) {
  if (method == "notifications/initialized") {
    std::lock_guard lock(state_mu_);
    initialized_ = true;
    return;
  }
  if (method == "notifications/cancelled") {
    if (!params.is_object() || !params.contains("requestId")) return;
    const std::string key = params["requestId"].dump();
    std::lock_guard lock(calls_mu_);
    if (auto it = calls_.find(key); it != calls_.end()) {
      it->second->client_cancelled = true;
      spdlog::debug("call {} cancelled by the client", key);
    }
    return;
  }
  spdlog::debug("ignoring notification {}", method);
}

void Server::HandleResponse(const json& message) {
  const json& id = message["id"];
  if (!id.is_string()) return;
  std::shared_ptr<Pending> pending;
  {
    std::lock_guard lock(calls_mu_);
    if (auto it = pending_.find(id.get<std::string>()); it != pending_.end()) {
      pending = it->second;
    }
  }
  if (!pending) {
    spdlog::debug("ignoring a response to unknown request {}", id.dump());
    return;
  }
  std::lock_guard lock(pending->mu);
  pending->response = message;
  pending->cv.notify_all();
}

json Server::Initialize(const json& params) {
  const ServerIdentity identity{options_.name, options_.title, options_.version,
                                options_.instructions};
  Negotiation negotiation = Negotiate(identity, params);
  std::lock_guard lock(state_mu_);
  negotiated_ = negotiation.version;
  client_elicitation_ = negotiation.elicitation;
  return std::move(negotiation.result);
}

json Server::ListTools(const json& id, const json& params) {
  if (auto cursor = params.find("cursor"); cursor != params.end() && !cursor->is_null()) {
    // Every tool fits on one page, so no cursor of ours exists.
    return MakeError(id, rpc::kInvalidParams, "Invalid params: unknown cursor");
  }
  return MakeResult(id, tools_.List(negotiated_version()));
}

std::optional<json> Server::RunCall(const json& id, const json& params,
                                    const std::shared_ptr<Call>& call) {
  CallOutcome outcome = CallTool(id, params, call);
  if (outcome.error) return std::move(*outcome.error);
  if (!outcome.result) return std::nullopt;
  return MakeResult(id, ToolSet::Shape(std::move(*outcome.result), outcome.version));
}

void Server::RunCallAndWrite(const json& id, const json& params, const std::shared_ptr<Call>& call,
                             const std::function<void()>& finish) {
  CallOutcome outcome = CallTool(id, params, call);
  if (outcome.error) {
    Write(*outcome.error);
  } else if (outcome.result && outcome.result->is_error) {
    Write(MakeResult(id, ToolSet::Shape(std::move(*outcome.result), outcome.version)));
  } else if (outcome.result) {
    WriteLine(SerializeToolResult(id, outcome.result->structured,
                                  outcome.version >= kStructuredContentVersion));
  }
  finish();  // the id is free again as soon as the host has its answer
  // `outcome` (the result, and what the tool left in after_reply) is freed here, after both.
}

Server::CallOutcome Server::CallTool(const json& id, const json& params,
                                     const std::shared_ptr<Call>& call) {
  const std::string& name = params["name"].get_ref<const std::string&>();
  const ToolSet::Tool* tool = tools_.Find(name);
  std::optional<json> arguments = ToolSet::Arguments(params);
  if (!arguments) {
    return {
        MakeError(id, rpc::kInvalidParams, "Invalid params: params.arguments must be an object"),
        std::nullopt,
        {}};
  }
  const std::string version = negotiated_version();
  CallContext context(*this, call, version);
  ToolResult result = tools_.Run(*tool, *arguments, context);
  if (call->client_cancelled.load()) {
    spdlog::debug("suppressing the response to cancelled call {}", id.dump());
    return {};
  }
  return {std::nullopt, std::move(result), version};
}

Result<ElicitResponse> Server::Elicit(Call& call, const std::string& message, const json& schema,
                                      std::chrono::milliseconds timeout) {
  const std::string request_id = "srv-" + std::to_string(next_request_id_++);
  const std::string version = negotiated_version();
  json requested = schema;
  if (version < "2025-11-25") {
    // Property defaults and string patterns exist only from 2025-11-25.
    if (auto props = requested.find("properties"); props != requested.end() && props->is_object()) {
      for (auto& [name, property] : props->items()) {
        if (property.is_object()) {
          property.erase("default");
          property.erase("pattern");
        }
      }
    }
  }
  json params{{"message", message}, {"requestedSchema", requested}};
  if (version >= "2025-11-25") params["mode"] = "form";
  auto pending = std::make_shared<Pending>();
  {
    std::lock_guard lock(calls_mu_);
    pending_[request_id] = pending;
  }
  const auto forget = [&] {
    std::lock_guard lock(calls_mu_);
    pending_.erase(request_id);
  };
  if (!Write(MakeRequest(request_id, "elicitation/create", std::move(params)))) {
    forget();
    return Error::Unavailable("the client's input is closed");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<json> response;
  bool timed_out = false;
  {
    std::unique_lock lock(pending->mu);
    while (!pending->response) {
      if (call.client_cancelled.load() || shutting_down_.load()) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        timed_out = true;
        break;
      }
      pending->cv.wait_for(lock, 50ms);
    }
    response = pending->response;
  }
  forget();
  if (!response) {
    Write(MakeNotification("notifications/cancelled",
                           {{"requestId", request_id},
                            {"reason", timed_out ? "timed out" : "the tool call was cancelled"}}));
    if (timed_out) return Error::Timeout("the user did not answer in time");
    return Error::Cancelled("the tool call was cancelled");
  }
  if (auto error = response->find("error"); error != response->end()) {
    std::string text = "the client answered elicitation/create with an error";
    if (error->is_object() && error->contains("message") && (*error)["message"].is_string()) {
      text += ": " + (*error)["message"].get<std::string>();
    }
    return Error::Protocol(text);
  }
  const json& result = (*response)["result"];
  if (!result.is_object() || !result.contains("action") || !result["action"].is_string()) {
    return Error::Protocol("the client's elicitation answer has no action");
  }
  ElicitResponse out;
  out.action = result["action"].get<std::string>();
  if (out.action != "accept" && out.action != "decline" && out.action != "cancel") {
    return Error::Protocol("the client's elicitation answer has an unknown action");
  }
  if (out.action == "accept") {
    auto content = result.find("content");
    if (content != result.end() && !content->is_object()) {
      return Error::Protocol("the client's elicitation content is not an object");
    }
    out.content = content != result.end() ? *content : json::object();
    // The client should have checked the answer against our schema; we do not rely on it.
    if (auto problem = ValidateSchema(out.content, schema, "content")) {
      return Error::Protocol("the client's elicitation content does not match the form: " +
                             *problem);
    }
  }
  return out;
}

}  // namespace tmcra::mcp
