// tmcra-mcp: the stdio MCP server. stdout carries JSON-RPC only; every log line goes to stderr.

#include <fcntl.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/version.h"
#include "src/app/app_wiring.h"
#include "src/app/hook_command.h"
#include "src/app/memory_command.h"
#include "src/app/retention.h"
#include "src/app/tmcra_mcp_help.h"

namespace {

// How often the retention policy is applied: TMCRA_RETENTION_INTERVAL_SECONDS (1..86400), else
// every ten minutes.
std::chrono::seconds RetentionPeriod() {
  const char* text = std::getenv("TMCRA_RETENTION_INTERVAL_SECONDS");
  const long seconds = text != nullptr ? std::strtol(text, nullptr, 10) : 0;
  return std::chrono::seconds(seconds >= 1 && seconds <= 86400 ? seconds : 600);
}

}  // namespace

// glibc serves allocations of 128 KiB and more with a fresh mmap each, and gives the free top of
// the heap back to the kernel above 128 KiB: a recall's answer (about 75 kB, built in strings
// that double as they grow) then faulted its pages in anew on every call, a tenth of the
// process's CPU per tmcra_recall. Up to 1 MiB comes from the heap, and up to 8 MiB of free heap
// is kept (fixed values also stop glibc from moving the thresholds as it goes).
// One arena for all threads: each thread that allocates (a tool call's pooled thread, the
// delivery thread, the engine's worker) otherwise gets an arena of its own, whose freed pages
// the others never reuse; the tool calls of one host rarely overlap, so they hardly contend.
void TuneAllocator() {
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
  mallopt(M_ARENA_MAX, 1);
}

// Where tmcra-mcp-console is: beside tmcra-mcp (a build tree), else in the libexec directory
// the install puts it in (TMCRA_CONSOLE_DIR, relative to tmcra-mcp's directory).
std::string ConsoleProgram() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "tmcra-mcp-console";
  const std::string path(self, static_cast<size_t>(n));
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  const std::string beside = dir + "tmcra-mcp-console";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return dir + TMCRA_CONSOLE_DIR + "/tmcra-mcp-console";
}

// `tmcra-mcp console ARGS`: runs tmcra-mcp-console with ARGS (src/app/console.h); returns only
// when it cannot.
int RunConsoleProgram(int argc, char** argv) {
  std::string program = ConsoleProgram();
  std::vector<char*> args{program.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(program.c_str(), args.data());
  std::fprintf(stderr, "tmcra-mcp console: cannot run %s: %s\n", program.c_str(),
               std::strerror(errno));
  return 1;
}

// The commands that are not an MCP session: a host's hooks and status line (docs/hooks.md),
// which fail open, and the memory commands (a person's or a script's: their output is the
// answer). nullopt: argv names none of them.
std::optional<int> RunCommand(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  const std::string_view command = argv[1];
  if (command == "hook" || command == "statusline") {
    if (fcntl(2, F_GETFD) < 0 && open("/dev/null", O_WRONLY) != 2) return 0;
    try {
      tmcra::InitLogging(spdlog::level::warn);
    } catch (const std::exception&) {
      return 0;
    }
    if (command == "statusline") return tmcra::app::RunStatusline();
    return tmcra::app::RunHookCommand({argv + 2, argv + argc});
  }
  if (command == "console") return RunConsoleProgram(argc, argv);
  if (command != "memory") return std::nullopt;
  try {
    tmcra::InitLogging(spdlog::level::warn);
  } catch (const std::exception&) {
    return 1;
  }
  return tmcra::app::RunMemoryCommand({argv + 2, argv + argc});
}

// --version and --help print to stdout: they are answers to a person, not an MCP session.
// nullopt: there is no option.
std::optional<int> RunOptions(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--version" || arg == "-V") {
      std::fprintf(stdout, "%s %s\n", tmcra::kProductName, tmcra::kVersion);  // stdout-ok
      return 0;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(tmcra::help::kText, stdout);  // stdout-ok
      return 0;
    }
    std::fprintf(stderr, "tmcra-mcp: unknown option '%.*s' (try --help)\n",
                 static_cast<int>(arg.size()), arg.data());
    return 2;
  }
  return std::nullopt;
}

// The MCP session on stdin and stdout, with the embedded memory's retention policy applied in
// the background (src/app/retention.h) and stopped before the memory it works on.
int Serve() {
  tmcra::InitLogging();
  tmcra::mcp::Server::InstallSignalHandlers();
  auto app = tmcra::app::BuildApp();
  if (!app) {
    spdlog::critical("configuration: {}", app.error().message);
    return 1;
  }
  std::unique_ptr<tmcra::app::RetentionWorker> retention;
  if (!app->settings.remote()) {
    retention = std::make_unique<tmcra::app::RetentionWorker>(
        *app->memory,
        [&app]() -> tmcra::queue::Outbox* {
          auto outbox = app->delivery->outbox();
          return outbox ? *outbox : nullptr;
        },
        app->settings.data_dir, RetentionPeriod());
  }
  spdlog::info("tmcra-mcp {} waiting for an MCP client on stdin", tmcra::kVersion);
  return app->server->Run(/*in_fd=*/0, /*out_fd=*/1);
}

int main(int argc, char** argv) {
  if (auto done = RunCommand(argc, argv)) return *done;
  if (auto done = RunOptions(argc, argv)) return *done;
  // stdin and stdout are the session: without them there is nothing to serve. Checked before
  // any descriptor is opened, since the first one opened would take a closed one's number (the
  // server would then read its own signal pipe as its input). A closed stderr gets /dev/null,
  // so that no file we open later becomes the log.
  for (int fd : {0, 1}) {
    if (fcntl(fd, F_GETFD) < 0) {
      std::fprintf(stderr, "tmcra-mcp: %s is not open; the host must give it a pipe\n",
                   fd == 0 ? "stdin" : "stdout");
      return 1;
    }
  }
  if (fcntl(2, F_GETFD) < 0 && open("/dev/null", O_WRONLY) != 2) return 1;
  TuneAllocator();
  try {
    return Serve();
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
