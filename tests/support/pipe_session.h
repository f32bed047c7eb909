// Drives an mcp::Server in-process over real pipes: Run() on its own thread, the test writes
// lines to its input and reads lines from its output with a timeout.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "src/mcp/server.h"

namespace tmcra::testing {

class PipeSession {
 public:
  explicit PipeSession(std::unique_ptr<mcp::Server> server);
  ~PipeSession();

  void SendLine(const std::string& line);
  void Send(const nlohmann::json& message) { SendLine(message.dump()); }
  // The next output line, or nothing after `timeout`.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // The next output line parsed; a JSON null when nothing came in time.
  nlohmann::json Read(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Sends a request and reads until the response with this id arrives (others are dropped).
  nlohmann::json Call(const nlohmann::json& id, const std::string& method,
                      nlohmann::json params = nlohmann::json::object());
  // initialize + notifications/initialized; returns the initialize result.
  nlohmann::json Initialize(const std::string& version, nlohmann::json capabilities = {});

  // Closes the server's input and waits for Run() to return; returns its exit code.
  int Finish();

  mcp::Server& server() { return *server_; }

 private:
  std::unique_ptr<mcp::Server> server_;
  int to_server_ = -1;
  int from_server_ = -1;
  std::string buffered_;
  std::thread thread_;
  int exit_code_ = -1;
  bool finished_ = false;
};

}  // namespace tmcra::testing
