#include "tests/support/pipe_session.h"

#include <poll.h>
#include <unistd.h>

#include <stdexcept>

namespace tmcra::testing {

using json = nlohmann::json;

PipeSession::PipeSession(std::unique_ptr<mcp::Server> server) : server_(std::move(server)) {
  int in[2];
  int out[2];
  if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
  to_server_ = in[1];
  from_server_ = out[0];
  const int server_in = in[0];
  const int server_out = out[1];
  thread_ = std::thread([this, server_in, server_out] {
    exit_code_ = server_->Run(server_in, server_out);
    close(server_in);
    close(server_out);
  });
}

PipeSession::~PipeSession() {
  Finish();
  if (from_server_ >= 0) close(from_server_);
}

void PipeSession::SendLine(const std::string& line) {
  const std::string framed = line + "\n";
  size_t done = 0;
  while (done < framed.size()) {
    const ssize_t n = write(to_server_, framed.data() + done, framed.size() - done);
    if (n <= 0) throw std::runtime_error("write to server failed");
    done += static_cast<size_t>(n);
  }
}

std::optional<std::string> PipeSession::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd fd{from_server_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    const ssize_t n = read(from_server_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

json PipeSession::Read(std::chrono::milliseconds timeout) {
  auto line = ReadLine(timeout);
  if (!line) return nullptr;
  return json::parse(*line);
}

json PipeSession::Call(const json& id, const std::string& method, json params) {
  Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  for (;;) {
    json message = Read();
    if (message.is_null()) return nullptr;
    if (message.is_object() && message.contains("id") && message["id"] == id &&
        !message.contains("method")) {
      return message;
    }
  }
}

json PipeSession::Initialize(const std::string& version, json capabilities) {
  if (capabilities.is_null()) capabilities = json::object();
  json response = Call("init", "initialize",
                       {{"protocolVersion", version},
                        {"capabilities", capabilities},
                        {"clientInfo", {{"name", "pipe-session"}, {"version", "0"}}}});
  Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  return response.is_object() && response.contains("result") ? response["result"] : response;
}

int PipeSession::Finish() {
  if (!finished_) {
    finished_ = true;
    close(to_server_);
    if (thread_.joinable()) thread_.join();
  }
  return exit_code_;
}

}  // namespace tmcra::testing
