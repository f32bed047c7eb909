// The real binaries as a host runs them: spawned with pipes, ended by EOF or signals.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

using namespace std::chrono_literals;
using json = nlohmann::json;
using tmcra::testing::Subprocess;

namespace {

const std::string kInit =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",)"
    R"("capabilities":{},"clientInfo":{"name":"t","version":"0"}}})";

std::map<std::string, std::string> IsolatedEnv(const tmcra::testing::TempDir& home) {
  return {{"HOME", home.path()}, {"TMCRA_LOG_LEVEL", "info"}};
}

bool ExitedZero(const std::optional<int>& status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

}  // namespace

TEST_CASE("version and help options answer and exit 0", "[process]") {
  Subprocess version({TMCRA_MCP_BIN, "--version"});
  CHECK(version.ReadLine() == std::string("tmcra-mcp 0.1.0"));
  CHECK(ExitedZero(version.Wait(5s)));
  Subprocess help({TMCRA_MCP_BIN, "--help"});
  CHECK(help.ReadAll(5s).find("Usage: tmcra-mcp") != std::string::npos);
  CHECK(ExitedZero(help.Wait(5s)));
  Subprocess bad({TMCRA_MCP_BIN, "--bogus"});
  auto status = bad.Wait(5s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 2);
}

TEST_CASE("startup says on stderr that it waits, and stdout stays silent", "[process]") {
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
  CHECK_FALSE(p.ReadLine(300ms).has_value());
  CHECK(p.Stderr().find("waiting for an MCP client") != std::string::npos);
  p.CloseStdin();
  CHECK(ExitedZero(p.Wait(2s)));
}

TEST_CASE("a pipe on stdout is widened to hold a whole recall answer line", "[process]") {
  // A 64 KiB pipe holds less than one recall's answer (about 75 kB): its write would wait for
  // the host to read the first part. Node hosts give a socket; Python and Rust hosts (Codex) a
  // pipe, as here.
  {
    // Only where this user may have such a pipe (pipe-max-size, the per-user pipe limits).
    int scratch[2];
    REQUIRE(pipe2(scratch, O_CLOEXEC) == 0);
    const bool allowed = fcntl(scratch[0], F_SETPIPE_SZ, 256 * 1024) >= 0;
    close(scratch[0]);
    close(scratch[1]);
    if (!allowed) {
      WARN("this user cannot have a 256 KiB pipe here; nothing to check");
      return;
    }
  }
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
  p.WriteLine(kInit);
  REQUIRE(p.ReadLine());  // serving: the pipe was looked at before the first read
  CHECK(fcntl(p.stdout_fd(), F_GETPIPE_SZ) >= 256 * 1024);
  p.CloseStdin();
  CHECK(ExitedZero(p.Wait(5s)));
}

TEST_CASE("end of input ends the process with 0 within a second", "[process][lifecycle]") {
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
  p.WriteLine(kInit);
  REQUIRE(p.ReadLine());
  const auto start = std::chrono::steady_clock::now();
  p.CloseStdin();
  auto status = p.Wait(5s);
  CHECK(ExitedZero(status));
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("embedded memory never loads libcurl, even after a tool call", "[process][startup]") {
  // libcurl and the ~30 libraries it pulls in are loaded at run time, for a remote memory only
  // (src/config/libcurl.h): a hook is a new process per event and pays for every library.
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
  p.WriteLine(kInit);
  REQUIRE(p.ReadLine());
  p.WriteLine(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tmcra_status",)"
              R"("arguments":{}}})");
  REQUIRE(p.ReadLine());
  std::string maps;
  {
    FILE* file = std::fopen(("/proc/" + std::to_string(p.pid()) + "/maps").c_str(), "r");
    REQUIRE(file != nullptr);
    char buffer[4096];
    size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) maps.append(buffer, got);
    std::fclose(file);
  }
  CHECK(maps.find("libcurl") == std::string::npos);
  CHECK(maps.find("libgnutls") == std::string::npos);
  CHECK(maps.find("libssl") == std::string::npos);
  p.CloseStdin();
  CHECK(ExitedZero(p.Wait(5s)));
}

#ifdef TMCRA_ENABLE_FAILPOINTS
TEST_CASE("remote memory without libcurl is a configuration error naming it",
          "[process][startup]") {
  // Test builds let the loader look for a library that does not exist.
  tmcra::testing::TempDir home;
  auto env = IsolatedEnv(home);
  env["TMCRA_API_KEY"] = "tmcra_test_key_0123456789abcdef";
  env["TMCRA_TEST_LIBCURL_SONAME"] = "libtmcra-no-such-curl.so.4";
  Subprocess p({TMCRA_MCP_BIN}, env);
  auto status = p.Wait(5s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));  // an exit, not a crash
  CHECK(WEXITSTATUS(*status) == 1);
  const std::string err = p.Stderr();
  INFO(err);
  CHECK(err.find("remote memory needs libcurl") != std::string::npos);
  CHECK(err.find("libtmcra-no-such-curl.so.4") != std::string::npos);
}
#endif

TEST_CASE("SIGTERM during a long call exits 0 within a second", "[process][lifecycle]") {
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_TESTSERVER_BIN}, IsolatedEnv(home));
  p.WriteLine(kInit);
  REQUIRE(p.ReadLine());
  p.WriteLine(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sleep","arguments":{"ms":60000}}})");
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  p.Signal(SIGTERM);
  auto status = p.Wait(5s);
  CHECK(ExitedZero(status));
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("SIGHUP and SIGINT end the process cleanly too", "[process][lifecycle]") {
  for (int signo : {SIGHUP, SIGINT}) {
    tmcra::testing::TempDir home;
    Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
    p.WriteLine(kInit);
    REQUIRE(p.ReadLine());
    p.Signal(signo);
    CHECK(ExitedZero(p.Wait(5s)));
  }
}

TEST_CASE("a closed stdout (EPIPE) ends the process instead of killing it",
          "[process][lifecycle]") {
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, IsolatedEnv(home));
  p.WriteLine(kInit);
  REQUIRE(p.ReadLine());
  p.CloseStdoutForTest();
  p.WriteLine(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  auto status = p.Wait(3s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));  // not killed by SIGPIPE
}

TEST_CASE("started without stdin or stdout, it says so and exits 1", "[process][lifecycle]") {
  // A descriptor we open would otherwise take the closed one's number: without stdin the server
  // read its own signal pipe as its input and waited forever.
  tmcra::testing::TempDir home;
  for (const char* redirect : {"<&-", ">&-"}) {
    INFO(redirect);
    Subprocess p({"/bin/sh", "-c", std::string("exec \"$0\" ") + redirect, TMCRA_MCP_BIN},
                 IsolatedEnv(home));
    auto status = p.Wait(5s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 1);
    CHECK(p.Stderr().find(redirect[0] == '<' ? "stdin is not open" : "stdout is not open") !=
          std::string::npos);
  }
}

TEST_CASE("a whole session writes nothing but JSON-RPC to stdout", "[process][stdout]") {
  tmcra::testing::TempDir home;
  Subprocess p({TMCRA_MCP_BIN}, {{"HOME", home.path()}, {"TMCRA_LOG_LEVEL", "trace"}});
  p.WriteLine(kInit);
  p.WriteLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  p.WriteLine(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  p.WriteLine(
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tmcra_status","arguments":{}}})");
  p.WriteLine("garbage");
  p.WriteLine(R"({"jsonrpc":"2.0","id":4,"method":"server/discover"})");
  p.CloseStdin();
  const std::string out = p.ReadAll(5s);
  CHECK(ExitedZero(p.Wait(5s)));
  size_t lines = 0;
  size_t start = 0;
  while (start < out.size()) {
    const size_t nl = out.find('\n', start);
    REQUIRE(nl != std::string::npos);  // every message ends with a newline
    json message = json::parse(out.substr(start, nl - start));
    CHECK(message["jsonrpc"] == "2.0");
    ++lines;
    start = nl + 1;
  }
  CHECK(lines == 5);
  CHECK(p.Stderr().find("waiting for an MCP client") != std::string::npos);
}
