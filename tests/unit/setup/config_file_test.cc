// Replacing host config files (setup/config_file.h) on a real file system: backups first,
// atomic replacement, modes kept, links followed, a concurrent change never overwritten.
#include "setup/config_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "setup/hosts.h"
#include "setup/setup.h"
#include "tests/support/temp_dir.h"

using tmcra::setup::ReadConfigFile;
using tmcra::setup::WriteConfigFile;
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

mode_t Mode(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.insert(n);
  }
  closedir(d);
  return names;
}

const auto kNoon = std::chrono::system_clock::from_time_t(1796212800);  // 2026-12-02 12:00 UTC

}  // namespace

TEST_CASE("a missing file is created 0600 in new 0700 directories, without a backup",
          "[setup][files]") {
  TempDir dir;
  const std::string path = dir.File("a/b/mcp.json");
  auto before = ReadConfigFile(path);
  REQUIRE(before);
  CHECK_FALSE(before->exists);
  auto written = WriteConfigFile(*before, "{}\n", kNoon);
  REQUIRE(written);
  CHECK(written->backup_path.empty());
  CHECK(Read(path) == "{}\n");
  CHECK(Mode(path) == 0600);
  CHECK(Mode(dir.File("a")) == 0700);
  CHECK(Mode(dir.File("a/b")) == 0700);
  CHECK(Names(dir.File("a/b")) == std::set<std::string>{"mcp.json"});
}

TEST_CASE("an existing file is backed up byte for byte, replaced, and keeps its mode",
          "[setup][files]") {
  TempDir dir;
  const std::string path = dir.File("config.toml");
  Write(path, "old = 1\n", 0640);
  auto before = ReadConfigFile(path);
  REQUIRE(before);
  REQUIRE(before->exists);
  CHECK(before->text == "old = 1\n");
  auto first = WriteConfigFile(*before, "new = 2\n", kNoon);
  REQUIRE(first);
  CHECK(first->backup_path == path + ".tmcra-backup-20261202T120000Z");
  CHECK(Read(first->backup_path) == "old = 1\n");
  CHECK(Mode(first->backup_path) == 0600);
  CHECK(Read(path) == "new = 2\n");
  CHECK(Mode(path) == 0640);
  // A second change in the same second keeps the first backup.
  auto again = ReadConfigFile(path);
  REQUIRE(again);
  auto second = WriteConfigFile(*again, "newer = 3\n", kNoon);
  REQUIRE(second);
  CHECK(second->backup_path == path + ".tmcra-backup-20261202T120000Z-2");
  CHECK(Read(second->backup_path) == "new = 2\n");
  CHECK(Read(first->backup_path) == "old = 1\n");
  CHECK(Names(dir.path()).size() == 3);  // the file and two backups, no temporary left
}

TEST_CASE("a symbolic link is followed: the target is edited, the link stays", "[setup][files]") {
  TempDir dir;
  REQUIRE(mkdir(dir.File("dotfiles").c_str(), 0700) == 0);
  const std::string target = dir.File("dotfiles/mcp.json");
  const std::string link = dir.File("mcp.json");
  Write(target, "{}\n");
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  auto before = ReadConfigFile(link);
  REQUIRE(before);
  CHECK(before->real_path == target);
  auto written = WriteConfigFile(*before, "{\"a\": 1}\n", kNoon);
  REQUIRE(written);
  struct stat st;
  REQUIRE(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(Read(target) == "{\"a\": 1}\n");
  CHECK(written->backup_path.rfind(target, 0) == 0);
}

TEST_CASE("a file the host changed after our read is not overwritten", "[setup][files]") {
  TempDir dir;
  const std::string path = dir.File("claude.json");
  Write(path, "{\"n\": 1}\n");
  auto before = ReadConfigFile(path);
  REQUIRE(before);
  Write(path, "{\"n\": 2, \"host\": \"wrote this\"}\n");  // another size, another mtime
  auto written = WriteConfigFile(*before, "{\"n\": 1, \"ours\": true}\n", kNoon);
  REQUIRE_FALSE(written);
  CHECK(written.error().code == tmcra::Errc::kConflict);
  CHECK(written.error().message.find("run the command again") != std::string::npos);
  CHECK(Read(path) == "{\"n\": 2, \"host\": \"wrote this\"}\n");
  CHECK(Names(dir.path()) == std::set<std::string>{"claude.json"});  // no backup, no temporary

  // A file that appeared since we saw none is not replaced either.
  auto none = ReadConfigFile(dir.File("new.json"));
  REQUIRE(none);
  Write(dir.File("new.json"), "{\"host\": 1}\n");
  CHECK_FALSE(WriteConfigFile(*none, "{}\n", kNoon));
  CHECK(Read(dir.File("new.json")) == "{\"host\": 1}\n");
}

TEST_CASE("a file with other hard links or without write permission is not replaced",
          "[setup][files]") {
  TempDir dir;
  const std::string path = dir.File("mcp.json");
  Write(path, "{}\n");
  REQUIRE(link(path.c_str(), dir.File("elsewhere.json").c_str()) == 0);
  auto linked = ReadConfigFile(path);
  REQUIRE(linked);
  auto refused = WriteConfigFile(*linked, "{\"a\": 1}\n", kNoon);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("other hard links") != std::string::npos);
  CHECK(Read(dir.File("elsewhere.json")) == "{}\n");
  REQUIRE(unlink(dir.File("elsewhere.json").c_str()) == 0);

  REQUIRE(chmod(path.c_str(), 0444) == 0);
  auto readonly = ReadConfigFile(path);
  REQUIRE(readonly);
  auto kept = WriteConfigFile(*readonly, "{\"a\": 1}\n", kNoon);
  REQUIRE_FALSE(kept);
  CHECK(kept.error().message.find("is read-only") != std::string::npos);
  CHECK(Read(path) == "{}\n");
  CHECK(Names(dir.path()) == std::set<std::string>{"mcp.json"});
}

TEST_CASE("only regular files are read", "[setup][files]") {
  TempDir dir;
  REQUIRE(mkdir(dir.File("mcp.json").c_str(), 0700) == 0);
  auto refused = ReadConfigFile(dir.File("mcp.json"));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("not a regular file") != std::string::npos);
  Write(dir.File("plain"), "x");
  auto under_file = ReadConfigFile(dir.File("plain/mcp.json"));
  REQUIRE(under_file);
  CHECK_FALSE(under_file->exists);
}

TEST_CASE("hosts: where each keeps its servers, per scope and platform", "[setup][hosts]") {
  using tmcra::setup::ConfigFormat;
  using tmcra::setup::ResolveHost;
  TempDir dir;
  tmcra::setup::HostEnvironment env;
  env.home = dir.path();
  auto path = [&](const char* host, std::optional<std::string> project = std::nullopt) {
    auto t = ResolveHost(host, env, project);
    REQUIRE(t);
    return t->path;
  };
  CHECK(path("claude-code") == dir.File(".claude.json"));
  CHECK(path("claude-desktop") == dir.File(".config/Claude/claude_desktop_config.json"));
  CHECK(path("codex") == dir.File(".codex/config.toml"));
  CHECK(path("cursor") == dir.File(".cursor/mcp.json"));
  CHECK(path("gemini-cli") == dir.File(".gemini/settings.json"));
  CHECK(path("vscode") == dir.File(".config/Code/User/mcp.json"));
  CHECK(path("claude-code", "/p") == "/p/.mcp.json");
  CHECK(path("codex", "/p") == "/p/.codex/config.toml");
  CHECK(path("cursor", "/p") == "/p/.cursor/mcp.json");
  CHECK(path("gemini-cli", "/p") == "/p/.gemini/settings.json");
  CHECK(path("vscode", "/p") == "/p/.vscode/mcp.json");
  CHECK_FALSE(ResolveHost("claude-desktop", env, std::string("/p")));
  CHECK_FALSE(ResolveHost("zed", env, std::nullopt));

  env.codex_home = "/srv/codex";
  env.xdg_config_home = "/xdg";
  env.gemini_cli_home = "/srv/gemini";  // it replaces the home, which holds .gemini
  CHECK(path("codex") == "/srv/codex/config.toml");
  CHECK(path("gemini-cli") == "/srv/gemini/.gemini/settings.json");
  CHECK(path("gemini-cli", "/p") == "/p/.gemini/settings.json");
  CHECK(path("vscode") == "/xdg/Code/User/mcp.json");
  env.macos = true;
  CHECK(path("claude-desktop") ==
        dir.File("Library/Application Support/Claude/claude_desktop_config.json"));
  CHECK(path("vscode") == dir.File("Library/Application Support/Code/User/mcp.json"));

  auto vscode = ResolveHost("vscode", env, std::nullopt);
  REQUIRE(vscode);
  CHECK(vscode->format == ConfigFormat::kJsonServers);
  CHECK(vscode->typed);
  CHECK_FALSE(vscode->present);
  env = {};
  env.home = dir.path();
  REQUIRE(mkdir(dir.File(".cursor").c_str(), 0700) == 0);
  auto cursor = ResolveHost("cursor", env, std::nullopt);
  REQUIRE(cursor);
  CHECK(cursor->present);
  CHECK_FALSE(cursor->typed);
  auto gemini = ResolveHost("gemini-cli", env, std::nullopt);
  REQUIRE(gemini);
  CHECK(gemini->label == "Gemini CLI (user)");
  CHECK(gemini->format == ConfigFormat::kJsonMcpServers);
  CHECK_FALSE(gemini->typed);
  CHECK_FALSE(gemini->present);
  REQUIRE(mkdir(dir.File(".gemini").c_str(), 0700) == 0);
  CHECK(ResolveHost("gemini-cli", env, std::nullopt)->present);
  env.gemini_cli_home = "";  // empty: as if unset
  CHECK(path("gemini-cli") == dir.File(".gemini/settings.json"));
  env.gemini_cli_home = dir.File("elsewhere");
  CHECK_FALSE(ResolveHost("gemini-cli", env, std::nullopt)->present);
  auto project = ResolveHost("gemini-cli", env, std::string("/p"));
  REQUIRE(project);
  CHECK(project->label == "Gemini CLI (project /p)");
  CHECK(project->present);
  CHECK(tmcra::setup::HostNames() == std::vector<std::string>{"claude-code", "claude-desktop",
                                                              "codex", "cursor", "gemini-cli",
                                                              "vscode"});
}

TEST_CASE("install, inspect and remove one host on real files", "[setup][hosts]") {
  TempDir dir;
  tmcra::setup::HostEnvironment env;
  env.home = dir.path();
  auto target = tmcra::setup::ResolveHost("codex", env, std::nullopt);
  REQUIRE(target);
  const std::string command = TMCRA_MCP_BIN;
  auto status = tmcra::setup::Inspect(*target, "tmcra", command);
  CHECK(status.state == "no config file");

  const auto entry = tmcra::setup::EntryFor(*target, "tmcra", command, {"TMCRA_API_KEY"}, false);
  CHECK(entry.tool_timeout_sec == 180);
  CHECK(entry.env_vars == std::vector<std::string>{"TMCRA_API_KEY"});
  auto dry = tmcra::setup::Install(*target, entry, /*dry_run=*/true, kNoon);
  CHECK(dry.ok);
  CHECK(dry.changed);
  CHECK(dry.message.find("would be registered") != std::string::npos);
  CHECK_FALSE(ReadConfigFile(target->path)->exists);

  auto installed = tmcra::setup::Install(*target, entry, false, kNoon);
  CHECK(installed.ok);
  CHECK(installed.message == "tmcra registered in " + target->path + " (created)");
  status = tmcra::setup::Inspect(*target, "tmcra", command);
  CHECK(status.state == "registered");
  CHECK(status.command == command);
  CHECK(status.command_is_ours);
  CHECK(status.command_runs);
  CHECK_FALSE(tmcra::setup::Inspect(*target, "tmcra", "/elsewhere/tmcra-mcp").command_is_ours);

  auto removed = tmcra::setup::Remove(*target, "tmcra", false, kNoon);
  CHECK(removed.ok);
  CHECK(removed.backup_path == target->path + ".tmcra-backup-20261202T120000Z");
  CHECK(tmcra::setup::Inspect(*target, "tmcra", command).state == "not registered");

  Write(target->path, "mcp_servers = { tmcra = { command = \"/x\" } }\n");
  auto refused = tmcra::setup::Install(*target, entry, false, kNoon);
  CHECK_FALSE(refused.ok);
  CHECK(refused.snippet.rfind("[mcp_servers.tmcra]\ncommand = ", 0) == 0);
  CHECK(Read(target->path) == "mcp_servers = { tmcra = { command = \"/x\" } }\n");
}

TEST_CASE("Gemini CLI: its settings.json keeps every other setting, remove gives it back",
          "[setup][hosts]") {
  TempDir dir;
  tmcra::setup::HostEnvironment env;
  env.home = dir.path();
  auto target = tmcra::setup::ResolveHost("gemini-cli", env, std::nullopt);
  REQUIRE(target);
  const std::string command = TMCRA_MCP_BIN;
  const auto entry = tmcra::setup::EntryFor(*target, "tmcra", command, {"TMCRA_API_KEY"}, true);
  CHECK(entry.tool_timeout_sec == 0);  // Gemini CLI's own default is 10 minutes
  CHECK(entry.env_vars.empty());
  // Its hooks are installed beside it: the entry says so. The key, which Gemini withholds from
  // its servers, is passed as a reference to Gemini's own environment.
  CHECK(entry.env ==
        std::vector<std::pair<std::string, std::string>>{{"TMCRA_HOOKS", "gemini-cli"}});
  CHECK(entry.env_if_absent ==
        std::vector<std::pair<std::string, std::string>>{{"TMCRA_API_KEY", "$TMCRA_API_KEY"}});
  CHECK_FALSE(entry.typed);
  CHECK(tmcra::setup::ResolveHooks("gemini-cli", env, std::nullopt)->path == target->path);

  const std::string original = R"({
  "general": {
    "vimMode": true
  },
  "mcpServers": {
    "other": {
      "command": "/bin/true",
      "timeout": 30000,
      "trust": false
    }
  },
  "security": {
    "folderTrust": {
      "enabled": true
    }
  }
}
)";
  REQUIRE(mkdir(dir.File(".gemini").c_str(), 0700) == 0);
  Write(target->path, original);
  auto installed = tmcra::setup::Install(*target, entry, false, kNoon);
  CHECK(installed.ok);
  CHECK(installed.backup_path == target->path + ".tmcra-backup-20261202T120000Z");
  CHECK(Read(installed.backup_path) == original);
  const auto doc = nlohmann::ordered_json::parse(Read(target->path));
  CHECK(doc["mcpServers"]["tmcra"] ==
        nlohmann::ordered_json::parse(R"({"command": ")" + command +
                                      R"(", "args": [], "env": {"TMCRA_HOOKS": "gemini-cli", )"
                                      R"("TMCRA_API_KEY": "$TMCRA_API_KEY"}})"));
  CHECK(doc["mcpServers"].size() == 2);
  CHECK(tmcra::setup::Inspect(*target, "tmcra", command).state == "registered");

  auto removed = tmcra::setup::Remove(*target, "tmcra", false, kNoon + std::chrono::seconds(1));
  CHECK(removed.ok);
  CHECK(Read(target->path) == original);

  // Gemini CLI reads comments in settings.json; rewriting would drop them, so it is refused.
  const std::string commented = "{\n  // mine\n  \"general\": {\"vimMode\": true}\n}\n";
  Write(target->path, commented);
  auto refused = tmcra::setup::Install(*target, entry, false, kNoon);
  CHECK_FALSE(refused.ok);
  CHECK(refused.message.find("comments") != std::string::npos);
  const std::string snippet_start = "{\n  \"mcpServers\": {\n    \"tmcra\": {\n      \"command\": ";
  CHECK(refused.snippet.rfind(snippet_start, 0) == 0);
  CHECK(Read(target->path) == commented);
}
