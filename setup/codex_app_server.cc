#include "setup/codex_app_server.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace tmcra::setup {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int in = -1;   // its stdin
  int out = -1;  // its stdout
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Starts `binary app-server` in a process group of its own, stdin and stdout piped.
Result<Child> Start(const std::string& binary) {
  int to_child[2];
  int from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0)
    return Error::Invalid(std::string("pipe: ") + strerror(errno));
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    const int err = errno;
    close(to_child[0]);
    close(to_child[1]);
    return Error::Invalid(std::string("pipe: ") + strerror(err));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
    return Error::Invalid(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    const char* argv[] = {binary.c_str(), "app-server", nullptr};
    execv(binary.c_str(), const_cast<char* const*>(argv));
    _exit(127);
  }
  setpgid(pid, pid);
  close(to_child[0]);
  close(from_child[1]);
  return Child{pid, to_child[1], from_child[0]};
}

// Closes its stdin, gives it a second to exit, then ends its process group.
void Stop(Child& child) {
  CloseFd(child.in);
  CloseFd(child.out);
  for (int i = 0; i < 20; ++i) {
    if (waitpid(child.pid, nullptr, WNOHANG) == child.pid) return;
    usleep(50'000);
  }
  kill(-child.pid, SIGTERM);
  for (int i = 0; i < 20; ++i) {
    if (waitpid(child.pid, nullptr, WNOHANG) == child.pid) return;
    usleep(50'000);
  }
  kill(-child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
}

Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Invalid("codex app-server closed its input");
    done += static_cast<size_t>(n);
  }
  return Ok();
}

// The next line of its stdout (without the newline), or an error at the deadline or its end.
Result<std::string> ReadLine(int fd, std::string& buffer, Clock::time_point deadline) {
  while (true) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Error::Timeout("codex app-server gave no answer in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Unavailable("codex app-server ended without answering");
    if (buffer.size() > (64u << 20))
      return Error::Invalid("codex app-server's answer is too large");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

std::string Text(const json& object, const char* key) {
  auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

Result<std::vector<CodexHook>> ParseHooks(const json& result) {
  std::vector<CodexHook> hooks;
  auto data = result.find("data");
  if (data == result.end() || !data->is_array()) {
    return Error::Invalid("codex app-server's hooks/list answer has no data");
  }
  for (const json& entry : *data) {
    auto list = entry.find("hooks");
    if (!entry.is_object() || list == entry.end() || !list->is_array()) continue;
    for (const json& hook : *list) {
      if (!hook.is_object()) continue;
      hooks.push_back({Text(hook, "key"), Text(hook, "eventName"), Text(hook, "command"),
                       Text(hook, "sourcePath"), Text(hook, "currentHash"),
                       Text(hook, "trustStatus")});
    }
  }
  return hooks;
}

// Sends the three messages and reads until the answer with id 2.
Result<std::vector<CodexHook>> Converse(Child& child, const std::string& cwd,
                                        Clock::time_point deadline,
                                        std::string_view client_version) {
  const json initialize = {
      {"jsonrpc", "2.0"},
      {"id", 1},
      {"method", "initialize"},
      {"params", {{"clientInfo", {{"name", "tmcra-mcp-setup"}, {"version", client_version}}}}}};
  const json initialized = {{"jsonrpc", "2.0"}, {"method", "initialized"}};
  const json list = {{"jsonrpc", "2.0"},
                     {"id", 2},
                     {"method", "hooks/list"},
                     {"params", {{"cwds", json::array({cwd})}}}};
  const std::string messages =
      initialize.dump() + "\n" + initialized.dump() + "\n" + list.dump() + "\n";
  if (auto s = WriteAll(child.in, messages); !s) return s.error();
  std::string buffer;
  while (true) {
    auto line = ReadLine(child.out, buffer, deadline);
    if (!line) return line.error();
    const json message = json::parse(*line, nullptr, /*allow_exceptions=*/false);
    if (!message.is_object() || !message.contains("id")) continue;
    if (auto error = message.find("error"); error != message.end()) {
      const std::string text = error->is_object() ? Text(*error, "message") : "";
      return Error::Invalid("codex app-server refused " +
                            std::string(message["id"] == 1 ? "initialize" : "hooks/list") +
                            (text.empty() ? "" : ": " + text));
    }
    if (message["id"] == 2 && message.contains("result")) return ParseHooks(message["result"]);
  }
}

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

}  // namespace

Result<std::vector<CodexHook>> ListCodexHooks(const std::string& codex_binary,
                                              const std::string& cwd,
                                              std::chrono::milliseconds timeout,
                                              std::string_view client_version) {
  // A write to a Codex that has ended must fail with EPIPE, not end this process.
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  auto child = Start(codex_binary);
  Result<std::vector<CodexHook>> hooks = Error::Invalid("not started");
  if (child) {
    hooks = Converse(*child, cwd, Clock::now() + timeout, client_version);
    Stop(*child);
  } else {
    hooks = child.error();
  }
  sigaction(SIGPIPE, &previous, nullptr);
  return hooks;
}

std::vector<CodexHook> HooksFromFile(const std::vector<CodexHook>& hooks, const std::string& path) {
  const std::string wanted = RealPath(path);
  std::vector<CodexHook> found;
  for (const CodexHook& hook : hooks) {
    if (hook.source_path == path || RealPath(hook.source_path) == wanted) found.push_back(hook);
  }
  return found;
}

}  // namespace tmcra::setup
