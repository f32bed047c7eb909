// tmcra-memd's connection layer in-process, over plain HTTP on 127.0.0.1 with raw sockets: a
// pipelined request behind one in progress does not run once its client has gone; past the
// connection cap the connection waiting longest for its head makes room, never one with a
// request in progress; a head past its deadline closes the connection.
#include "memd/http_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

using tmcra::memd::HttpApp;
using tmcra::memd::HttpListener;
using tmcra::memd::HttpRequest;
using tmcra::memd::HttpResponse;
using tmcra::memd::ListenerOptions;

namespace {

// Answers /block once released; counts every request it answers, by target.
class ScriptedApp final : public HttpApp {
 public:
  HttpResponse Answer(const HttpRequest& req) override {
    if (req.target == "/block") {
      std::unique_lock lock(mu_);
      blocked_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    if (req.target == "/count") ++counted_;
    HttpResponse res;
    res.body = req.target;
    return res;
  }
  HttpResponse Refusal(const HttpRequest&, int status, std::string_view,
                       std::string_view message) override {
    HttpResponse res;
    res.status = status;
    res.body = std::string(message);
    return res;
  }
  void WaitBlocked() {
    std::unique_lock lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_; }));
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int counted() const { return counted_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool blocked_ = false;
  bool released_ = false;
  std::atomic<int> counted_{0};
};

class ListenerFixture {
 public:
  explicit ListenerFixture(ListenerOptions options) : listener_(std::move(options), app_) {
    auto port = listener_.Bind();
    REQUIRE(port);
    port_ = *port;
    serving_ = std::thread([this] { (void)listener_.Serve(); });
  }
  ~ListenerFixture() {
    app_.Release();
    listener_.Stop();
    serving_.join();
  }
  ListenerFixture(const ListenerFixture&) = delete;
  ListenerFixture& operator=(const ListenerFixture&) = delete;

  int Connect() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
  }
  static void Write(int fd, const std::string& text) {
    REQUIRE(send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
  }
  // Everything until the server closes (or the 5 s receive timeout).
  static std::string ReadAll(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // True when the server has closed `fd` (EOF or a reset) within `ms`.
  static bool ClosedWithin(int fd, int ms) {
    const timeval timeout{0, ms * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char c;
    const ssize_t n = recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

  ScriptedApp app_;
  HttpListener listener_;
  int port_ = 0;
  std::thread serving_;
};

void Pause(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("pipelined requests are answered in order, one at a time", "[memd][listener]") {
  ListenerFixture f(ListenerOptions{});
  const int fd = f.Connect();
  f.Write(fd,
          "GET /a HTTP/1.1\r\n\r\nGET /count HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n"
          "Connection: close\r\n\r\n");
  const std::string all = ListenerFixture::ReadAll(fd);
  close(fd);
  const size_t a = all.find("\r\n\r\n/a");
  const size_t b = all.find("\r\n\r\n/count");
  const size_t c = all.find("\r\n\r\n/c", b + 1);
  CHECK(a != std::string::npos);
  CHECK(b > a);
  CHECK(c != std::string::npos);
  CHECK(c > b);
  CHECK(f.app_.counted() == 1);
}

TEST_CASE("a pipelined request behind one in progress does not run once its client has gone",
          "[memd][listener]") {
  ListenerFixture f(ListenerOptions{});
  const int fd = f.Connect();
  f.Write(fd, "GET /block HTTP/1.1\r\n\r\nGET /count HTTP/1.1\r\n\r\n");
  f.app_.WaitBlocked();
  close(fd);  // the client gives up while /block is in progress
  Pause(100);
  f.app_.Release();
  Pause(500);
  CHECK(f.app_.counted() == 0);
  CHECK(f.listener_.stats().requests <= 1);
}

TEST_CASE(
    "past the connection cap, the connection waiting longest for its head makes room, and a "
    "request in progress is never the one",
    "[memd][listener]") {
  ListenerOptions options;
  options.max_connections = 3;
  ListenerFixture f(options);
  const int busy = f.Connect();
  f.Write(busy, "GET /block HTTP/1.1\r\n\r\n");
  f.app_.WaitBlocked();
  const int silent = f.Connect();
  Pause(50);
  const int partial = f.Connect();
  f.Write(partial, "GET /x HTTP/1.1\r\nHost:");
  Pause(50);
  const int newest = f.Connect();  // the fourth: the silent one (oldest waiting) goes
  CHECK(ListenerFixture::ClosedWithin(silent, 1000));
  const int fifth = f.Connect();  // then the partial head
  CHECK(ListenerFixture::ClosedWithin(partial, 1000));
  CHECK(f.listener_.stats().evicted == 2);
  // The request in progress is answered.
  f.app_.Release();
  const timeval timeout{5, 0};
  setsockopt(busy, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char buf[256];
  const ssize_t n = recv(busy, buf, sizeof buf, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200 ", 0) == 0);
  for (int fd : {busy, silent, partial, newest, fifth}) close(fd);
}

TEST_CASE("a connection that does not finish its head within the head deadline is closed",
          "[memd][listener]") {
  ListenerOptions options;
  options.head_timeout_seconds = 1;
  ListenerFixture f(options);
  const int fd = f.Connect();
  f.Write(fd, "GET / HTTP/1.1\r\nX-Slow: ");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8 && !ListenerFixture::ClosedWithin(fd, 250); ++i) {
    (void)send(fd, "a", 1, MSG_NOSIGNAL);  // a byte at a time does not extend the deadline
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited < std::chrono::milliseconds(1900));
  CHECK(f.listener_.stats().timed_out == 1);
  close(fd);
}
