// libFuzzer target over every tool tmcra-mcp serves, wired as main() wires them (src/app) over
// the embedded engine on a real SQLite file in a scratch directory: arbitrary bytes are split
// into lines by the real LineReader and handed to a fresh server per input (tools run inline).
// Beyond a crash, a sanitizer report, a hang or an uncaught exception, two answers are bugs:
//   - a line on the output that is not one JSON value;
//   - an internal error: a tool whose handler threw or returned no object ("<tool> failed:
//     internal error"), or a request that failed with JSON-RPC -32603. Arguments that pass the
//     tool's schema must be handled (refused with a message, or served), never thrown on.
// Each input gets a copy of an empty store, in a scratch directory on /dev/shm when there is one
// (no fsync reaches a disk); the engine's worker runs jobs in the background, so an input does
// not always replay alike.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "src/app/app_wiring.h"
#include "src/mcp/line_reader.h"

namespace {

std::string g_scratch;  // the fuzz run's HOME, data and outbox; removed at exit
int g_out = -1;         // the server's output: a memory file, read back after each input

void RemoveScratch() {
  std::error_code ec;
  if (!g_scratch.empty()) std::filesystem::remove_all(g_scratch, ec);
}

// Scratch directories of earlier runs whose process is gone (a crash or a -timeout exits
// without atexit handlers).
void RemoveStaleScratch(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "tmcra-fuzz-tools-";
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

[[noreturn]] void Bug(std::string_view what, std::string_view line) {
  std::fprintf(stderr, "fuzz_memory_tools: %.*s: %.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(std::min<size_t>(line.size(), 2000)), line.data());
  std::abort();
}

// Every output line is one JSON value and reports no internal error.
void CheckOutput() {
  const off_t size = lseek(g_out, 0, SEEK_END);
  std::string out(static_cast<size_t>(std::max<off_t>(size, 0)), '\0');
  if (size > 0 && pread(g_out, out.data(), out.size(), 0) != size) Bug("short read", "");
  if (ftruncate(g_out, 0) != 0 || lseek(g_out, 0, SEEK_SET) != 0) Bug("reset failed", "");
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) Bug("unterminated output line", out.substr(start));
    const std::string_view line(out.data() + start, end - start);
    start = end + 1;
    const auto value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) Bug("output line is not JSON", line);
    // Judged on the structure, not the text: an error message may quote the input.
    const auto check_error = [&](const nlohmann::json& message) {
      if (!message.is_object()) return;
      if (const auto error = message.find("error"); error != message.end() && error->is_object()) {
        const auto code = error->find("code");
        if (code != error->end() && *code == -32603) Bug("JSON-RPC internal error", line);
      }
      const auto result = message.find("result");
      if (result == message.end() || !result->is_object() ||
          result->value("isError", false) != true) {
        return;
      }
      const auto content = result->find("content");
      if (content == result->end() || !content->is_array()) return;
      for (const auto& block : *content) {
        const auto text = block.find("text");
        if (text == block.end() || !text->is_string()) continue;
        const std::string& t = text->get_ref<const std::string&>();
        constexpr std::string_view kSuffix = " failed: internal error";
        if (t.rfind("tmcra_", 0) == 0 && t.size() > kSuffix.size() &&
            t.compare(t.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0 &&
            t.find(' ') == t.size() - kSuffix.size()) {
          Bug("internal error", line);
        }
      }
    };
    if (value.is_array()) {
      for (const auto& message : value) check_error(message);
    } else {
      check_error(value);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::error_code ec;
  const std::string parent = std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : "/tmp";
  RemoveStaleScratch(parent);
  std::string dir = parent + "/tmcra-fuzz-tools-" + std::to_string(getpid()) + "-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_scratch = dir;
  std::atexit(RemoveScratch);
  // The embedded default, in the scratch directory only: no account, no config file of the
  // machine's user, a confirmation that times out at once (the fuzzer answers no elicitation).
  for (const char* name :
       {"TMCRA_API_KEY", "TMCRA_BASE_URL", "TMCRA_CONFIG_FILE", "TMCRA_LOCAL_BINDING_FILE",
        "TMCRA_DEFAULT_SCOPE", "TMCRA_AGENT_ID", "TMCRA_INTEGRATION_ID", "SSLKEYLOGFILE",
        "TMCRA_MEMORY_STATE_DIR", "PLUGIN_DATA", "TMCRA_MCP_QUEUE_FILE", "TMCRA_CA_FILE",
        "TMCRA_MAX_ATTEMPTS", "TMCRA_REQUEST_TIMEOUT_SECONDS", "TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE",
        "TMCRA_FAILPOINTS"}) {
    unsetenv(name);
  }
  const std::string home = g_scratch + "/home";
  setenv("HOME", home.c_str(), 1);
  setenv("XDG_CONFIG_HOME", (home + "/.config").c_str(), 1);
  setenv("XDG_DATA_HOME", (home + "/.local/share").c_str(), 1);
  setenv("XDG_STATE_HOME", (home + "/.local/state").c_str(), 1);
  setenv("XDG_CACHE_HOME", (home + "/.cache").c_str(), 1);
  setenv("TMCRA_DATA_DIR", (g_scratch + "/data").c_str(), 1);
  setenv("TMCRA_CONFIRMATION_TIMEOUT_MS", "1", 1);
  spdlog::set_level(spdlog::level::off);
  g_out = memfd_create("fuzz-memory-tools-out", MFD_CLOEXEC);
  if (g_out < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  // An empty store made once and copied for each input (making its schema cost a tenth of an
  // input).
  {
    auto app = tmcra::app::BuildApp();
    if (!app) Bug("BuildApp failed", app.error().message);
    if (auto stats = app->memory->Stats(); !stats) Bug("store not created", stats.error().message);
  }
  std::filesystem::rename(g_scratch + "/data", g_scratch + "/template", ec);
  if (ec) Bug("no store to copy", ec.message());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Each input starts from an empty store and no outbox or controls state: inputs stay
  // independent, and a state grown over thousands of inputs does not slow every later one.
  std::error_code ec;
  std::filesystem::remove_all(g_scratch + "/home", ec);
  std::filesystem::remove_all(g_scratch + "/data", ec);
  std::filesystem::copy(g_scratch + "/template", g_scratch + "/data",
                        std::filesystem::copy_options::recursive, ec);
  if (ec) Bug("cannot copy the empty store", ec.message());
  tmcra::app::AppOptions options;
  options.inline_tools = true;
  auto app = tmcra::app::BuildApp(options);
  if (!app) Bug("BuildApp failed", app.error().message);
  app->server->SetOutputForTest(g_out);
  tmcra::mcp::LineReader reader(tmcra::mcp::kMaxLineBytes);
  const tmcra::mcp::LineReader::LineFn on_line = [&](std::string_view line, bool oversized) {
    app->server->HandleLineForTest(line, oversized);
  };
  reader.Feed(std::string_view(reinterpret_cast<const char*>(data), size), on_line);
  reader.Finish(on_line);
  CheckOutput();
  return 0;
}
