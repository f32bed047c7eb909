// Installing, inspecting and removing hooks on real files (setup/setup.h): backups, dry runs,
// idempotence, byte-exact removal, status per event with Codex's trust (from a stand-in
// `codex app-server`), host detection on PATH, the build-tree warning and env_vars.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "setup/codex_app_server.h"
#include "setup/config_file.h"
#include "setup/hooks_edit.h"
#include "setup/hosts.h"
#include "setup/setup.h"
#include "tests/support/temp_dir.h"

using tmcra::setup::HooksTarget;
using tmcra::setup::HookState;
using tmcra::testing::TempDir;

namespace {

void Write(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

mode_t Mode(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

const auto kNoon = std::chrono::system_clock::from_time_t(1796212800);  // 2026-12-02 12:00 UTC
const std::string kBin = "/opt/tmcra/bin/tmcra-mcp";

tmcra::setup::HostEnvironment Home(const TempDir& dir) {
  tmcra::setup::HostEnvironment env;
  env.home = dir.path();
  return env;
}

const HookState& Event(const tmcra::setup::HooksStatus& s, const std::string& event) {
  for (const auto& e : s.events) {
    if (e.event == event) return e;
  }
  FAIL("no event " << event);
  return s.events.front();
}

// A stand-in for `codex app-server`: reads the three requests, answers with `hooks` (a JSON
// array) after an unrelated notification, then waits for its stdin to close.
std::string FakeCodex(const TempDir& dir, const std::string& hooks) {
  mkdir(dir.File("bin").c_str(), 0700);
  Write(dir.File("bin/answer"),
        "{\"id\":2,\"result\":{\"data\":[{\"cwd\":\"/\",\"hooks\":" + hooks + "}]}}\n");
  const std::string path = dir.File("bin/codex");
  Write(path,
        "#!/bin/sh\nread a; read b; read c\necho '{\"id\":1,\"result\":{}}'\n"
        "echo '{\"method\":\"configWarning\"}'\ncat '" +
            dir.File("bin/answer") + "'\ncat >/dev/null\n",
        0755);
  return path;
}

}  // namespace

TEST_CASE("hooks on real files: dry run, backup, once only, remove gives the file back",
          "[setup][hooks]") {
  TempDir dir;
  auto target = tmcra::setup::ResolveHooks("claude-code", Home(dir), std::nullopt);
  REQUIRE(target);
  CHECK(target->path == dir.File(".claude/settings.json"));
  REQUIRE(mkdir(dir.File(".claude").c_str(), 0700) == 0);
  const std::string original =
      "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n       "
      "     \"type\": \"command\",\n            \"command\": \"mine\"\n          }\n        ]\n "
      "     }\n    ]\n  }\n}";
  Write(target->path, original);
  const auto hooks = tmcra::setup::OurHooks("claude-code", kBin, false);

  auto dry = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, true, kNoon);
  CHECK(dry.ok);
  CHECK(dry.changed);
  CHECK(dry.message == "7 tmcra-mcp hooks would be set in " + target->path);
  CHECK(Read(target->path) == original);
  CHECK_FALSE(Exists(target->path + ".tmcra-backup-20261202T120000Z"));

  auto installed = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, false, kNoon);
  CHECK(installed.ok);
  CHECK(installed.backup_path == target->path + ".tmcra-backup-20261202T120000Z");
  CHECK(Read(installed.backup_path) == original);
  CHECK(Mode(installed.backup_path) == 0600);
  CHECK(Mode(target->path) == 0644);
  const std::string with_hooks = Read(target->path);

  auto again = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, false, kNoon);
  CHECK(again.ok);
  CHECK_FALSE(again.changed);
  CHECK(again.message.find("already in") != std::string::npos);
  CHECK(again.backup_path.empty());
  CHECK(Read(target->path) == with_hooks);

  auto removed = tmcra::setup::RemoveHooks(*target, false, kNoon);
  CHECK(removed.ok);
  CHECK(removed.backup_path == target->path + ".tmcra-backup-20261202T120000Z-2");
  CHECK(Read(target->path) == original);
}

TEST_CASE("hooks on real files: a file only we wrote is removed again, the statusline ours only",
          "[setup][hooks]") {
  TempDir dir;
  auto target = tmcra::setup::ResolveHooks("codex", Home(dir), std::nullopt);
  REQUIRE(target);
  CHECK(target->path == dir.File(".codex/hooks.json"));
  const auto hooks = tmcra::setup::OurHooks("codex", kBin, true);
  auto created = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, false, kNoon);
  CHECK(created.ok);
  CHECK(created.message.find("(created)") != std::string::npos);
  CHECK(Mode(target->path) == 0600);
  CHECK(Mode(dir.File(".codex")) == 0700);
  auto removed = tmcra::setup::RemoveHooks(*target, false, kNoon);
  CHECK(removed.ok);
  CHECK(removed.message.find("the file is removed") != std::string::npos);
  CHECK_FALSE(Exists(target->path));
  CHECK(Exists(removed.backup_path));

  auto claude = tmcra::setup::ResolveHooks("claude-code", Home(dir), std::nullopt);
  REQUIRE(claude);
  REQUIRE(mkdir(dir.File(".claude").c_str(), 0700) == 0);
  Write(claude->path, "{\"statusLine\": {\"type\": \"command\", \"command\": \"mine\"}}\n");
  const auto line = tmcra::setup::StatusLineCommand(kBin);
  auto kept = tmcra::setup::InstallHooks(
      *claude, tmcra::setup::OurHooks("claude-code", kBin, false), line, false, kNoon);
  CHECK(kept.ok);
  CHECK(kept.message.find("statusLine of its own") != std::string::npos);
  auto status =
      tmcra::setup::InspectHooks(*claude, tmcra::setup::OurHooks("claude-code", kBin, false));
  CHECK(status.statusline.present);
  CHECK_FALSE(status.statusline.ours);
  CHECK_FALSE(tmcra::setup::ResolveHooks("cursor", Home(dir), std::nullopt));
  CHECK(tmcra::setup::ResolveHooks("codex", Home(dir), std::string("/p"))->path ==
        "/p/.codex/hooks.json");
  CHECK(tmcra::setup::ResolveHooks("claude-code", Home(dir), std::string("/p"))->path ==
        "/p/.claude/settings.json");
}

TEST_CASE("hooks status: installed or not, whether Claude Code runs them, what to do",
          "[setup][hooks]") {
  TempDir dir;
  auto target = tmcra::setup::ResolveHooks("claude-code", Home(dir), std::nullopt);
  REQUIRE(target);
  const auto hooks = tmcra::setup::OurHooks("claude-code", kBin, false);
  auto none = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(none.state == "no file");
  CHECK(none.events.size() == 7);
  CHECK_FALSE(Event(none, "Stop").installed);
  CHECK(Event(none, "Stop").runs == "no");
  CHECK(Event(none, "Stop").todo == "run tmcra-mcp-setup install --host claude-code");

  REQUIRE(tmcra::setup::InstallHooks(*target, tmcra::setup::OurHooks("claude-code", kBin, true),
                                     std::nullopt, false, kNoon)
              .ok);
  auto on = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(on.state == "ok");
  CHECK(on.events.size() == 8);  // PostToolUse found beside the wanted seven
  CHECK(Event(on, "Stop").installed);
  CHECK(Event(on, "Stop").current);
  CHECK(Event(on, "Stop").runs == "yes");
  CHECK(Event(on, "Stop").todo.empty());
  CHECK(Event(on, "PostToolUse").installed);

  auto other = tmcra::setup::InspectHooks(
      *target, tmcra::setup::OurHooks("claude-code", "/new/tmcra-mcp", false));
  CHECK_FALSE(Event(other, "Stop").current);
  CHECK(Event(other, "Stop").todo.find("another tmcra-mcp") != std::string::npos);

  std::string text = Read(target->path);
  text.insert(1, "\n  \"disableAllHooks\": true,");
  Write(target->path, text);
  auto off = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(off.disabled);
  CHECK(Event(off, "Stop").runs == "no");
  CHECK(Event(off, "Stop").todo.find("disableAllHooks") != std::string::npos);
}

TEST_CASE("Gemini CLI: hooks beside the server in settings.json, status, removed byte for byte",
          "[setup][hooks]") {
  TempDir dir;
  auto env = Home(dir);
  auto server = tmcra::setup::ResolveHost("gemini-cli", env, std::nullopt);
  auto target = tmcra::setup::ResolveHooks("gemini-cli", env, std::nullopt);
  REQUIRE(server);
  REQUIRE(target);
  CHECK(target->path == server->path);
  CHECK(target->path == dir.File(".gemini/settings.json"));
  CHECK(target->label == "Gemini CLI (user) hooks");
  CHECK(tmcra::setup::ResolveHooks("gemini-cli", env, std::string("/p"))->path ==
        "/p/.gemini/settings.json");
  env.gemini_cli_home = "/g";
  CHECK(tmcra::setup::ResolveHooks("gemini-cli", env, std::nullopt)->path ==
        "/g/.gemini/settings.json");

  REQUIRE(mkdir(dir.File(".gemini").c_str(), 0700) == 0);
  const std::string original =
      "{\n\t\"general\": {\n\t\t\"vimMode\": true\n\t},\n\t\"mcpServers\": {\n\t\t\"other\": "
      "{\n\t\t\t\"command\": \"/bin/true\"\n\t\t}\n\t}\n}\n";
  Write(target->path, original);
  const auto hooks = tmcra::setup::OurHooks("gemini-cli", kBin, false);
  auto entry = tmcra::setup::EntryFor(*server, "tmcra", kBin, {}, true);
  auto dry = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, true, kNoon);
  CHECK(dry.message == "4 tmcra-mcp hooks would be added to " + target->path);
  CHECK(Read(target->path) == original);
  REQUIRE(tmcra::setup::Install(*server, entry, false, kNoon).ok);
  auto installed = tmcra::setup::InstallHooks(*target, hooks, std::nullopt, false, kNoon);
  CHECK(installed.ok);
  CHECK(installed.backup_path == target->path + ".tmcra-backup-20261202T120000Z-2");

  auto status = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(status.state == "ok");
  CHECK(status.events.size() == 4);
  CHECK(Event(status, "AfterAgent").current);
  CHECK(Event(status, "AfterAgent").runs == "yes");
  CHECK(Event(status, "AfterAgent").todo.empty());

  // Turned off by name in hooksConfig.disabled, or all of them.
  std::string text = Read(target->path);
  const std::string with_hooks = text;
  const std::string by_name = "\"disabled\": [\"tmcra-AfterAgent\"]";
  text.insert(1, "\n\t\"hooksConfig\": {" + by_name + "},");
  Write(target->path, text);
  auto named = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(Event(named, "AfterAgent").runs == "no");
  CHECK(Event(named, "AfterAgent").todo ==
        "take \"tmcra-AfterAgent\" out of \"hooksConfig\".\"disabled\" in " + target->path);
  CHECK(Event(named, "BeforeAgent").runs == "yes");
  Write(target->path, text.replace(text.find(by_name), by_name.size(), "\"enabled\": false"));
  auto off = tmcra::setup::InspectHooks(*target, hooks);
  CHECK(off.disabled);
  CHECK(Event(off, "BeforeAgent").runs == "no");
  CHECK(Event(off, "BeforeAgent").todo.find("\"enabled\": true") != std::string::npos);
  Write(target->path, with_hooks);

  REQUIRE(tmcra::setup::Remove(*server, "tmcra", false, kNoon).ok);
  auto removed = tmcra::setup::RemoveHooks(*target, false, kNoon);
  CHECK(removed.ok);
  CHECK(Read(target->path) == original);
  CHECK(Exists(target->path));
}

TEST_CASE("Codex: app-server's hooks/list read, trust recorded and removed with the entry",
          "[setup][hooks]") {
  TempDir dir;
  const auto env = Home(dir);
  auto hooks_target = tmcra::setup::ResolveHooks("codex", env, std::nullopt);
  auto config = tmcra::setup::ResolveHost("codex", env, std::nullopt);
  REQUIRE(hooks_target);
  REQUIRE(config);
  REQUIRE(mkdir(dir.File(".codex").c_str(), 0700) == 0);
  const std::string original_toml = "model = \"gpt-5\"\n";
  Write(config->path, original_toml);
  Write(hooks_target->path,
        R"({"hooks":{"Stop":[{"hooks":[{"type":"command","command":"mine"}]}]}})"
        "\n");
  const auto hooks = tmcra::setup::OurHooks("codex", kBin, false);
  REQUIRE(tmcra::setup::InstallHooks(*hooks_target, hooks, std::nullopt, false, kNoon).ok);
  auto entry = tmcra::setup::EntryFor(*config, "tmcra", kBin, {"TMCRA_DATA_DIR"}, true);
  REQUIRE(tmcra::setup::Install(*config, entry, false, kNoon).ok);
  CHECK(Read(config->path).find("env = { TMCRA_HOOKS = \"codex\" }") != std::string::npos);

  auto keys = tmcra::setup::OurTrustKeys(*hooks_target);
  REQUIRE(keys);
  REQUIRE(keys->size() == 7);
  CHECK((*keys)[0] == hooks_target->path + ":stop:1:0");

  const std::string p = hooks_target->path;
  const std::string listed_json =
      "[{\"key\":\"" + p +
      ":stop:0:0\",\"eventName\":\"stop\",\"command\":\"mine\",\"sourcePath\":\"" + p +
      "\",\"currentHash\":\"sha256:00\",\"trustStatus\":\"untrusted\"},"
      "{\"key\":\"" +
      p + ":stop:1:0\",\"eventName\":\"stop\",\"command\":\"" + hooks[2].command +
      "\",\"sourcePath\":\"" + p +
      "\",\"currentHash\":\"sha256:11\",\"trustStatus\":\"untrusted\"},"
      "{\"key\":\"" +
      p + ":session_end:0:0\",\"eventName\":\"sessionEnd\",\"command\":\"" + hooks[5].command +
      "\",\"sourcePath\":\"" + p +
      "\",\"currentHash\":\"sha256:55\",\"trustStatus\":\"modified\"},"
      "{\"key\":\"" +
      p + ":session_start:0:0\",\"eventName\":\"sessionStart\",\"command\":\"" + hooks[0].command +
      "\",\"sourcePath\":\"" + p + "\",\"currentHash\":\"sha256:22\",\"trustStatus\":\"trusted\"}]";
  const std::string codex = FakeCodex(dir, listed_json);
  auto listed = tmcra::setup::ListCodexHooks(codex, dir.path(), std::chrono::seconds(10), "1.0");
  REQUIRE(listed);
  REQUIRE(listed->size() == 4);
  CHECK((*listed)[1].current_hash == "sha256:11");
  CHECK((*listed)[2].trust_status == "modified");

  auto status = tmcra::setup::InspectHooks(*hooks_target, hooks);
  tmcra::setup::AddCodexTrust(status, *hooks_target, listed, false);
  CHECK(Event(status, "Stop").trust == "untrusted");
  CHECK(Event(status, "Stop").runs == "no");
  CHECK(Event(status, "Stop").todo.find("/hooks in Codex") != std::string::npos);
  CHECK(Event(status, "SessionEnd").trust == "modified");
  CHECK(Event(status, "SessionStart").trust == "trusted");
  CHECK(Event(status, "SessionStart").runs == "yes");
  CHECK(Event(status, "SessionStart").todo.empty());
  CHECK(Event(status, "Interrupt").trust == "not listed");
  auto unasked = tmcra::setup::InspectHooks(*hooks_target, hooks);
  tmcra::setup::AddCodexTrust(unasked, *hooks_target,
                              tmcra::Error::NotFound("codex is not on PATH"), false);
  CHECK(Event(unasked, "Stop").runs == "unknown");
  CHECK(Event(unasked, "Stop").todo == "could not ask Codex: codex is not on PATH");
  auto off = tmcra::setup::InspectHooks(*hooks_target, hooks);
  tmcra::setup::AddCodexTrust(off, *hooks_target, listed, true);
  CHECK(Event(off, "Stop").runs == "no");

  const std::string before_trust = Read(config->path);
  auto trusted = tmcra::setup::TrustCodexHooks(*config, *hooks_target, *listed, false, kNoon);
  CHECK(trusted.ok);
  CHECK(trusted.message.find("3 tmcra-mcp hooks") != std::string::npos);  // not the user's "mine"
  CHECK(Read(trusted.backup_path) == before_trust);
  const std::string toml = Read(config->path);
  CHECK(toml.find("[hooks.state.\"" + p + ":stop:1:0\"]\ntrusted_hash = \"sha256:11\"") !=
        std::string::npos);
  CHECK(toml.find("sha256:00") == std::string::npos);

  auto removed = tmcra::setup::Remove(*config, "tmcra", false, kNoon, *keys);
  CHECK(removed.ok);
  CHECK(Read(config->path) == original_toml);
}

TEST_CASE("Codex app-server: errors and silence are errors, never a hang", "[setup][hooks]") {
  TempDir dir;
  const std::string silent = dir.File("silent");
  Write(silent, "#!/bin/sh\nsleep 30\n", 0755);
  const auto start = std::chrono::steady_clock::now();
  auto none = tmcra::setup::ListCodexHooks(silent, dir.path(), std::chrono::milliseconds(300), "1");
  CHECK_FALSE(none);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  const std::string refusing = dir.File("refusing");
  Write(refusing,
        "#!/bin/sh\nread a\necho '{\"id\":1,\"error\":{\"message\":\"no\"}}'\ncat >/dev/null\n",
        0755);
  auto refused = tmcra::setup::ListCodexHooks(refusing, dir.path(), std::chrono::seconds(5), "1");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message == "codex app-server refused initialize: no");
  auto missing =
      tmcra::setup::ListCodexHooks(dir.File("nope"), dir.path(), std::chrono::seconds(5), "1");
  CHECK_FALSE(missing);
}

TEST_CASE("hosts: a program on PATH counts as the host being present", "[setup][hosts]") {
  TempDir dir;
  auto env = Home(dir);
  REQUIRE(mkdir(dir.File("bin").c_str(), 0700) == 0);
  env.path = "relative:" + dir.File("empty") + "::" + dir.File("bin");
  for (const char* host : {"claude-code", "codex", "cursor", "gemini-cli", "vscode"}) {
    CHECK_FALSE(tmcra::setup::ResolveHost(host, env, std::nullopt)->present);
  }
  Write(dir.File("bin/claude"), "#!/bin/sh\n", 0755);
  Write(dir.File("bin/code"), "#!/bin/sh\n", 0755);
  Write(dir.File("bin/gemini"), "#!/bin/sh\n", 0755);
  Write(dir.File("bin/cursor"), "not executable\n", 0644);
  CHECK(tmcra::setup::ResolveHost("claude-code", env, std::nullopt)->present);
  CHECK(tmcra::setup::ResolveHost("vscode", env, std::nullopt)->present);
  CHECK(tmcra::setup::ResolveHost("gemini-cli", env, std::nullopt)->present);
  CHECK_FALSE(tmcra::setup::ResolveHost("cursor", env, std::nullopt)->present);
  CHECK_FALSE(tmcra::setup::ResolveHost("codex", env, std::nullopt)->present);
  CHECK(tmcra::setup::FindOnPath("claude", env.path) == dir.File("bin/claude"));
  CHECK_FALSE(tmcra::setup::FindOnPath("bin/claude", env.path));
}

TEST_CASE("a binary in a build tree is recognized", "[setup][hosts]") {
  TempDir dir;
  REQUIRE(mkdir(dir.File("cmake-out").c_str(), 0700) == 0);
  REQUIRE(mkdir(dir.File("cmake-out/src").c_str(), 0700) == 0);
  Write(dir.File("cmake-out/CMakeCache.txt"), "");
  CHECK(tmcra::setup::InBuildTree(dir.File("cmake-out/src/tmcra-mcp")));
  REQUIRE(mkdir(dir.File("checkout").c_str(), 0700) == 0);
  REQUIRE(mkdir(dir.File("checkout/build").c_str(), 0700) == 0);
  REQUIRE(mkdir(dir.File("checkout/build/ci").c_str(), 0700) == 0);
  CHECK_FALSE(tmcra::setup::InBuildTree(dir.File("checkout/build/ci/tmcra-mcp")));
  Write(dir.File("checkout/CMakeLists.txt"), "");
  CHECK(tmcra::setup::InBuildTree(dir.File("checkout/build/ci/tmcra-mcp")));
  CHECK_FALSE(tmcra::setup::InBuildTree(dir.File("usr/local/bin/tmcra-mcp")));
}

TEST_CASE("Gemini CLI's entry passes the variables set when installing as $NAME references",
          "[setup][hosts]") {
  TempDir dir;
  auto gemini = tmcra::setup::ResolveHost("gemini-cli", Home(dir), std::nullopt);
  REQUIRE(gemini);
  const auto names = tmcra::setup::VariablesToPass(
      {"TMCRA_API_KEY", "TMCRA_BASE_URL", "SSL_CERT_FILE", "PATH", "TMCRA_HOOKS"});
  const auto entry = tmcra::setup::EntryFor(*gemini, "tmcra", kBin, names, true);
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  CHECK(entry.env == Pairs{{"TMCRA_HOOKS", "gemini-cli"}});
  CHECK(entry.env_if_absent == Pairs{{"SSL_CERT_FILE", "$SSL_CERT_FILE"},
                                     {"TMCRA_API_KEY", "$TMCRA_API_KEY"},
                                     {"TMCRA_BASE_URL", "$TMCRA_BASE_URL"}});
  CHECK(entry.env_vars.empty());
  CHECK(tmcra::setup::EntryFor(*gemini, "tmcra", kBin, {}, false).env_if_absent.empty());
  // Another host never gets them.
  auto claude = tmcra::setup::ResolveHost("claude-code", Home(dir), std::nullopt);
  REQUIRE(claude);
  CHECK(tmcra::setup::EntryFor(*claude, "tmcra", kBin, names, false).env_if_absent.empty());

  // Written where the entry has no such variable; a user's own value for one is kept, and
  // installing again changes nothing.
  REQUIRE(mkdir(dir.File(".gemini").c_str(), 0700) == 0);
  std::ofstream(gemini->path)
      << R"({"mcpServers": {"tmcra": {"command": "/old", "env": {"TMCRA_API_KEY": "${WORK_KEY}"}}}})";
  const auto now = std::chrono::system_clock::now();
  REQUIRE(tmcra::setup::Install(*gemini, entry, false, now).ok);
  std::ifstream in(gemini->path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find(R"("TMCRA_API_KEY": "${WORK_KEY}")") != std::string::npos);
  CHECK(text.str().find(R"("SSL_CERT_FILE": "$SSL_CERT_FILE")") != std::string::npos);
  CHECK(text.str().find(R"("TMCRA_BASE_URL": "$TMCRA_BASE_URL")") != std::string::npos);
  const auto again = tmcra::setup::Install(*gemini, entry, false, now + std::chrono::seconds(1));
  CHECK(again.ok);
  CHECK_FALSE(again.changed);
  // The entry to add by hand holds them too.
  CHECK(tmcra::setup::EntrySnippet(gemini->format, entry)
            .find(R"("TMCRA_API_KEY": "$TMCRA_API_KEY")") != std::string::npos);
}

TEST_CASE("Codex env_vars: only the variables set when installing", "[setup][hosts]") {
  CHECK(tmcra::setup::VariablesToPass({"HOME", "TMCRA_DATA_DIR", "PATH", "TMCRA_HOOKS",
                                       "HTTPS_PROXY", "TMCRA_API_KEY", "http_proxy"}) ==
        std::vector<std::string>{"HTTPS_PROXY", "TMCRA_API_KEY", "TMCRA_DATA_DIR"});
  CHECK(tmcra::setup::VariablesToPass({"HOME"}).empty());
  TempDir dir;
  auto codex = tmcra::setup::ResolveHost("codex", Home(dir), std::nullopt);
  REQUIRE(codex);
  auto bare = tmcra::setup::EntryFor(*codex, "tmcra", kBin, {}, false);
  CHECK(bare.env_vars.empty());
  CHECK(bare.env.empty());
  CHECK(tmcra::setup::EntrySnippet(codex->format, bare).find("env_vars") == std::string::npos);
  auto cursor = tmcra::setup::ResolveHost("cursor", Home(dir), std::nullopt);
  CHECK(tmcra::setup::EntryFor(*cursor, "tmcra", kBin, {"TMCRA_X"}, true).env.empty());
  auto claude = tmcra::setup::ResolveHost("claude-code", Home(dir), std::nullopt);
  CHECK(tmcra::setup::EntryFor(*claude, "tmcra", kBin, {}, true).env ==
        std::vector<std::pair<std::string, std::string>>{{"TMCRA_HOOKS", "claude-code"}});
}
