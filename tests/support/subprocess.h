// A real child process with pipes on stdin, stdout and stderr, for tests that drive the
// binaries the way a host does (and kill them with real signals).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tmcra::testing {

class Subprocess {
 public:
  // Starts `argv[0]` with `argv`; `env` entries are added to (or replace) the environment.
  Subprocess(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  void WriteLine(const std::string& line);
  void CloseStdin();
  // Closes our end of the child's stdout, so its next write fails with EPIPE.
  void CloseStdoutForTest();
  // The next stdout line, or nothing on timeout or end of output.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Everything left on stdout until end of output (or the timeout).
  std::string ReadAll(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Signal(int signo);
  // Waits for the exit; returns the raw wait status, or nothing on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Stderr collected so far (drained without blocking).
  std::string Stderr();

  pid_t pid() const { return pid_; }
  // Our end of the child's stdout pipe.
  int stdout_fd() const { return stdout_; }

 private:
  void DrainStderr();

  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int stderr_ = -1;
  std::string out_buffer_;
  std::string err_buffer_;
  bool reaped_ = false;
};

}  // namespace tmcra::testing
