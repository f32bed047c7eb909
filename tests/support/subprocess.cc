#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tmcra::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env) {
  int in[2];
  int out[2];
  int err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    signal(SIGPIPE, SIG_DFL);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  fcntl(stderr_, F_SETFL, O_NONBLOCK);
}

Subprocess::~Subprocess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  for (int fd : {stdin_, stdout_, stderr_}) {
    if (fd >= 0) close(fd);
  }
}

void Subprocess::WriteLine(const std::string& line) {
  const std::string framed = line + "\n";
  size_t done = 0;
  while (done < framed.size()) {
    const ssize_t n = write(stdin_, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("write to child failed");
    done += static_cast<size_t>(n);
  }
}

void Subprocess::CloseStdin() {
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

void Subprocess::CloseStdoutForTest() {
  if (stdout_ >= 0) close(stdout_);
  stdout_ = -1;
}

std::optional<std::string> Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = out_buffer_.find('\n'); nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      return line;
    }
    DrainStderr();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd fd{stdout_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(std::min<long>(left.count(), 100))) <= 0) continue;
    char buf[65536];
    const ssize_t n = read(stdout_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    out_buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::string Subprocess::ReadAll(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd fd{stdout_, POLLIN, 0};
    if (poll(&fd, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = read(stdout_, buf, sizeof buf);
    if (n <= 0) break;
    out_buffer_.append(buf, static_cast<size_t>(n));
  }
  std::string all;
  all.swap(out_buffer_);
  return all;
}

void Subprocess::Signal(int signo) { kill(pid_, signo); }

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      DrainStderr();
      return status;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    DrainStderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Subprocess::DrainStderr() {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(stderr_, buf, sizeof buf);
    if (n <= 0) return;
    err_buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::string Subprocess::Stderr() {
  DrainStderr();
  return err_buffer_;
}

}  // namespace tmcra::testing
