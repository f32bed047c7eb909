// Editing hooks (setup/hooks_edit.h) and the Codex parts of config_edit.h that come with them
// (the TMCRA_HOOKS marker, hooks.state trust): only our handlers change, the user's stay, and
// add then remove gives the original text back byte for byte.
#include "setup/hooks_edit.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "setup/config_edit.h"

using tmcra::setup::AddHooks;
using tmcra::setup::EditOutcome;
using tmcra::setup::HookHandler;
using tmcra::setup::IsOurHookCommand;
using tmcra::setup::OurHooks;
using tmcra::setup::RemoveHooks;

namespace {

const std::string kBin = "/opt/tmcra/bin/tmcra-mcp";

nlohmann::ordered_json Json(const std::string& text) { return nlohmann::ordered_json::parse(text); }

std::string Added(const std::string& text, const std::vector<HookHandler>& hooks,
                  std::optional<std::string> statusline = std::nullopt) {
  auto edited = AddHooks(text, hooks, statusline);
  REQUIRE(edited);
  return edited->text;
}

std::string Removed(const std::string& text) {
  auto edited = RemoveHooks(text);
  REQUIRE(edited);
  return edited->text;
}

}  // namespace

TEST_CASE("hooks: the events, timeouts and commands of each host", "[setup][hooks]") {
  auto events = [](const std::vector<HookHandler>& hooks) {
    std::vector<std::string> out;
    for (const auto& h : hooks) out.push_back(h.event + "=" + std::to_string(h.timeout));
    return out;
  };
  CHECK(events(OurHooks("claude-code", kBin, false)) ==
        std::vector<std::string>{"SessionStart=10", "UserPromptSubmit=10", "Stop=10",
                                 "StopFailure=10", "SubagentStop=10", "PreCompact=10",
                                 "SessionEnd=2"});
  CHECK(events(OurHooks("codex", kBin, false)) ==
        std::vector<std::string>{"SessionStart=10", "UserPromptSubmit=10", "Stop=10",
                                 "SubagentStop=10", "PreCompact=10", "SessionEnd=2",
                                 "Interrupt=2"});
  CHECK(events(OurHooks("codex", kBin, true)).back() == "PostToolUse=10");
  CHECK(OurHooks("cursor", kBin, true).empty());
  CHECK(OurHooks("codex", kBin, false)[2].command ==
        "'/opt/tmcra/bin/tmcra-mcp' hook Stop --host codex");
  CHECK(OurHooks("claude-code", "/it's/tmcra-mcp", false)[0].command ==
        "'/it'\\''s/tmcra-mcp' hook SessionStart --host claude-code");
  CHECK(tmcra::setup::StatusLineCommand(kBin) == "'/opt/tmcra/bin/tmcra-mcp' statusline");
  CHECK(tmcra::setup::SnakeCaseEvent("UserPromptSubmit") == "user_prompt_submit");
  CHECK(tmcra::setup::SnakeCaseEvent("Stop") == "stop");
}

TEST_CASE("hooks: which commands are ours", "[setup][hooks]") {
  CHECK(IsOurHookCommand("'/opt/x/tmcra-mcp' hook Stop --host codex"));
  CHECK(IsOurHookCommand("/usr/bin/tmcra-mcp hook Stop"));
  CHECK(IsOurHookCommand("tmcra-mcp statusline"));
  CHECK(IsOurHookCommand("\"/a b/tmcra-mcp\" hook Stop"));
  CHECK(IsOurHookCommand("'/it'\\''s/tmcra-mcp' hook Stop"));
  CHECK_FALSE(IsOurHookCommand("/usr/bin/tmcra-mcp-setup hook Stop"));
  CHECK_FALSE(IsOurHookCommand("/usr/bin/tmcra-mcp serve"));
  CHECK_FALSE(IsOurHookCommand("echo tmcra-mcp hook"));
  CHECK_FALSE(IsOurHookCommand("tmcra-mcp"));
  CHECK_FALSE(IsOurHookCommand(""));
}

TEST_CASE("hooks: the contract's shape in an empty file, once", "[setup][hooks]") {
  const auto hooks = OurHooks("codex", kBin, false);
  for (const std::string text : {"", "{}"}) {
    const std::string added = Added(text, hooks);
    const auto doc = Json(added);
    REQUIRE(doc["hooks"].size() == 7);
    CHECK(
        doc["hooks"]["Stop"] ==
        Json(
            R"([{"hooks":[{"type":"command","command":"'/opt/tmcra/bin/tmcra-mcp' hook Stop --host codex","timeout":10}]}])"));
    CHECK(doc["hooks"]["Interrupt"][0]["hooks"][0]["timeout"] == 2);
    auto again = AddHooks(added, hooks, std::nullopt);
    REQUIRE(again);
    CHECK(again->outcome == EditOutcome::kUnchanged);
    CHECK(again->text == added);
  }
}

TEST_CASE("hooks: the user's hooks are kept, add then remove gives the file back byte for byte",
          "[setup][hooks]") {
  // Claude Code's own layout: 2 spaces, no final newline, a hook of the user's in Stop.
  const std::string original =
      "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"matcher\": "
      "\"\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n           "
      " \"command\": \"my-stop-hook\"\n          }\n        ]\n      }\n    ],\n    "
      "\"Notification\": []\n  },\n  \"theme\": \"dark\"\n}";
  const auto hooks = OurHooks("claude-code", kBin, true);
  const std::string added = Added(original, hooks);
  const auto doc = Json(added);
  REQUIRE(doc["hooks"]["Stop"].size() == 2);
  CHECK(doc["hooks"]["Stop"][0] == Json(original)["hooks"]["Stop"][0]);
  CHECK(doc["hooks"]["Stop"][1]["hooks"][0]["command"] == hooks[2].command);
  CHECK(doc["hooks"]["Notification"] == nlohmann::ordered_json::array());
  CHECK(doc["theme"] == "dark");
  CHECK(added.back() == '}');
  CHECK(Removed(added) == original);
  // Nothing of ours: nothing changes, the empty Notification list stays.
  auto absent = RemoveHooks(original);
  REQUIRE(absent);
  CHECK(absent->outcome == EditOutcome::kAbsent);
  CHECK(absent->text == original);
}

TEST_CASE("hooks: ours are updated in place, doubles and unwanted PostToolUse taken out",
          "[setup][hooks]") {
  const std::string old = R"({"hooks": {"Stop": [
    {"hooks": [{"type": "command", "command": "mine"},
               {"type": "command", "command": "/old/tmcra-mcp hook Stop --host codex", "timeout": 30}]},
    {"hooks": [{"type": "command", "command": "/old/tmcra-mcp hook Stop --host codex"}]}],
  "PostToolUse": [{"hooks": [{"type": "command", "command": "/old/tmcra-mcp hook PostToolUse"}]}],
  "SubagentStart": [{"hooks": [{"type": "command", "command": "/old/tmcra-mcp hook SubagentStart"}]}]}})";
  const auto hooks = OurHooks("codex", kBin, false);
  auto edited = AddHooks(old, hooks, std::nullopt);
  REQUIRE(edited);
  CHECK(edited->outcome == EditOutcome::kUpdated);
  const auto doc = Json(edited->text);
  REQUIRE(doc["hooks"]["Stop"].size() == 1);
  CHECK(doc["hooks"]["Stop"][0]["hooks"][0]["command"] == "mine");
  CHECK(
      doc["hooks"]["Stop"][0]["hooks"][1] ==
      Json(
          R"({"type":"command","command":"'/opt/tmcra/bin/tmcra-mcp' hook Stop --host codex","timeout":10})"));
  CHECK_FALSE(doc["hooks"].contains("PostToolUse"));
  // An event setup does not manage is not touched.
  CHECK(doc["hooks"]["SubagentStart"][0]["hooks"][0]["command"] ==
        "/old/tmcra-mcp hook SubagentStart");
  auto found = tmcra::setup::FindOurHooks(edited->text);
  REQUIRE(found);
  CHECK(found->size() == 8);
  CHECK((*found)[0].event == "Stop");
  CHECK((*found)[0].group == 0);
  CHECK((*found)[0].handler == 1);
  CHECK((*found)[0].timeout == 10);
}

TEST_CASE("hooks: a statusLine is set when there is none or it is ours, never replacing the user's",
          "[setup][hooks]") {
  const auto hooks = OurHooks("claude-code", kBin, false);
  const std::string ours = tmcra::setup::StatusLineCommand(kBin);
  auto set = AddHooks("{}", hooks, ours);
  REQUIRE(set);
  CHECK_FALSE(set->foreign_statusline);
  CHECK(Json(set->text)["statusLine"] ==
        Json(R"({"type":"command","command":"'/opt/tmcra/bin/tmcra-mcp' statusline"})"));
  auto line = tmcra::setup::FindStatusLine(set->text);
  REQUIRE(line);
  CHECK(line->ours);
  CHECK(Removed(set->text) == "{}");

  const std::string users =
      "{\n  \"statusLine\": {\n    \"type\": \"command\",\n    \"command\": \"~/bin/line.sh\"\n  "
      "}\n}\n";
  auto kept = AddHooks(users, hooks, ours);
  REQUIRE(kept);
  CHECK(kept->foreign_statusline);
  CHECK(Json(kept->text)["statusLine"]["command"] == "~/bin/line.sh");
  CHECK(Removed(kept->text) == users);
  auto theirs = tmcra::setup::FindStatusLine(users);
  REQUIRE(theirs);
  CHECK(theirs->present);
  CHECK_FALSE(theirs->ours);
}

TEST_CASE("hooks: wrong shapes are refused, disableAllHooks is seen", "[setup][hooks]") {
  const auto hooks = OurHooks("codex", kBin, false);
  CHECK_FALSE(AddHooks(R"({"hooks": []})", hooks, std::nullopt));
  CHECK_FALSE(AddHooks(R"({"hooks": {"Stop": {}}})", hooks, std::nullopt));
  CHECK_FALSE(AddHooks("{\n // c\n}", hooks, std::nullopt));
  CHECK(*tmcra::setup::AllHooksDisabled("claude-code", R"({"disableAllHooks": true})"));
  CHECK_FALSE(*tmcra::setup::AllHooksDisabled("claude-code", R"({"disableAllHooks": false})"));
}

TEST_CASE("hooks: Gemini CLI's events, in milliseconds, named, wrapped to never block a turn",
          "[setup][hooks]") {
  auto events = [](const std::vector<HookHandler>& hooks) {
    std::vector<std::string> out;
    for (const auto& h : hooks) out.push_back(h.event + "=" + std::to_string(h.timeout));
    return out;
  };
  CHECK(events(OurHooks("gemini-cli", kBin, false)) ==
        std::vector<std::string>{"SessionStart=10000", "BeforeAgent=10000", "AfterAgent=10000",
                                 "SessionEnd=2000"});
  CHECK(events(OurHooks("gemini-cli", kBin, true)).back() == "AfterTool=10000");
  const HookHandler before = OurHooks("gemini-cli", kBin, false)[1];
  CHECK(before.command ==
        "'/opt/tmcra/bin/tmcra-mcp' hook BeforeAgent --host gemini-cli 2>/dev/null || true");
  CHECK(before.name == "tmcra-BeforeAgent");
  CHECK(before.matcher == "*");
  CHECK(IsOurHookCommand(before.command));
  CHECK(OurHooks("codex", kBin, false)[0].name.empty());
  CHECK_FALSE(OurHooks("codex", kBin, false)[0].matcher);
}

TEST_CASE("hooks: Gemini CLI's settings.json keeps the rest, add then remove gives it back",
          "[setup][hooks]") {
  const std::string original = R"({
  "general": {
    "vimMode": true
  },
  "mcpServers": {
    "tmcra": {
      "command": "/opt/tmcra/bin/tmcra-mcp",
      "args": []
    }
  },
  "hooksConfig": {
    "notifications": true
  },
  "hooks": {
    "BeforeAgent": [
      {
        "matcher": "",
        "hooks": [
          {
            "name": "mine",
            "type": "command",
            "command": "my-hook",
            "timeout": 500
          }
        ]
      }
    ]
  }
}
)";
  const auto hooks = OurHooks("gemini-cli", kBin, true);
  const std::string added = Added(original, hooks);
  const auto doc = Json(added);
  CHECK(doc["hooks"]["AfterAgent"] ==
        Json(R"([{"matcher":"*","hooks":[{"name":"tmcra-AfterAgent","type":"command",)"
             R"("command":"'/opt/tmcra/bin/tmcra-mcp' hook AfterAgent --host gemini-cli )"
             R"(2>/dev/null || true","timeout":10000}]}])"));
  REQUIRE(doc["hooks"]["BeforeAgent"].size() == 2);
  CHECK(doc["hooks"]["BeforeAgent"][0] == Json(original)["hooks"]["BeforeAgent"][0]);
  CHECK(doc["hooks"]["AfterTool"][0]["hooks"][0]["name"] == "tmcra-AfterTool");
  CHECK(doc["mcpServers"] == Json(original)["mcpServers"]);
  CHECK(doc["hooksConfig"] == Json(original)["hooksConfig"]);
  auto again = AddHooks(added, hooks, std::nullopt);
  REQUIRE(again);
  CHECK(again->outcome == EditOutcome::kUnchanged);
  // Without --observe-tools, ours in AfterTool goes.
  auto fewer = AddHooks(added, OurHooks("gemini-cli", kBin, false), std::nullopt);
  REQUIRE(fewer);
  CHECK_FALSE(Json(fewer->text)["hooks"].contains("AfterTool"));
  auto found = tmcra::setup::FindOurHooks(added);
  REQUIRE(found);
  REQUIRE(found->size() == 5);
  CHECK((*found)[0].event == "BeforeAgent");
  CHECK((*found)[0].group == 1);
  CHECK((*found)[0].name == "tmcra-BeforeAgent");
  CHECK((*found)[0].timeout == 10000);
  CHECK(Removed(added) == original);
  CHECK(Removed(fewer->text) == original);
}

TEST_CASE("hooks: Gemini CLI's hooksConfig turns all hooks, or some by name, off",
          "[setup][hooks]") {
  using tmcra::setup::AllHooksDisabled;
  using tmcra::setup::DisabledHookNames;
  CHECK(*AllHooksDisabled("gemini-cli", R"({"hooksConfig": {"enabled": false}})"));
  CHECK_FALSE(*AllHooksDisabled("gemini-cli", R"({"hooksConfig": {"enabled": true}})"));
  CHECK_FALSE(*AllHooksDisabled("gemini-cli", R"({"disableAllHooks": true})"));
  CHECK_FALSE(*AllHooksDisabled("codex", R"({"disableAllHooks": true})"));
  CHECK_FALSE(AllHooksDisabled("gemini-cli", "{\n // c\n}"));
  CHECK(*DisabledHookNames(R"({"hooksConfig": {"disabled": ["tmcra-AfterAgent", 3, "x"]}})") ==
        std::vector<std::string>{"tmcra-AfterAgent", "x"});
  CHECK(DisabledHookNames(R"({"hooksConfig": {"disabled": "x"}})")->empty());
  CHECK(DisabledHookNames("{}")->empty());
}

TEST_CASE("JSON: the file's final newline state is kept", "[setup][json]") {
  using tmcra::setup::ConfigFormat;
  tmcra::setup::ServerEntry entry;
  entry.name = "tmcra";
  entry.command = kBin;
  const std::string without = "{\n  \"numStartups\": 3,\n  \"mcpServers\": {}\n}";
  auto added = tmcra::setup::AddServer(without, ConfigFormat::kJsonMcpServers, entry);
  REQUIRE(added);
  CHECK(added->text.back() == '}');
  auto removed = tmcra::setup::RemoveServer(added->text, ConfigFormat::kJsonMcpServers, "tmcra");
  REQUIRE(removed);
  CHECK(removed->text == without);
  auto with = tmcra::setup::AddServer(without + "\n", ConfigFormat::kJsonMcpServers, entry);
  REQUIRE(with);
  CHECK(with->text.back() == '\n');
}

TEST_CASE("the TMCRA_HOOKS marker: JSON env and Codex env, the user's variables kept",
          "[setup][hooks]") {
  using tmcra::setup::AddServer;
  using tmcra::setup::ConfigFormat;
  tmcra::setup::ServerEntry entry;
  entry.name = "tmcra";
  entry.command = kBin;
  entry.env = {{"TMCRA_HOOKS", "codex"}};

  auto json = AddServer(R"({"mcpServers": {"tmcra": {"command": "x", "env": {"A": "b"}}}})",
                        ConfigFormat::kJsonMcpServers, entry);
  REQUIRE(json);
  CHECK(Json(json->text)["mcpServers"]["tmcra"]["env"] ==
        Json(R"({"A":"b","TMCRA_HOOKS":"codex"})"));

  const std::string base = "model = \"gpt-5\"\n";
  auto fresh = AddServer(base, ConfigFormat::kCodexToml, entry);
  REQUIRE(fresh);
  CHECK(fresh->text == base + "\n[mcp_servers.tmcra]\ncommand = \"" + kBin +
                           "\"\nenv = { TMCRA_HOOKS = \"codex\" }\n");
  auto removed = tmcra::setup::RemoveServer(fresh->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(removed);
  CHECK(removed->text == base);
  auto again = AddServer(fresh->text, ConfigFormat::kCodexToml, entry);
  REQUIRE(again);
  CHECK(again->outcome == EditOutcome::kUnchanged);

  auto inline_env =
      AddServer("[mcp_servers.tmcra]\ncommand = \"" + kBin + "\"\nenv = { A = \"b\" } # mine\n",
                ConfigFormat::kCodexToml, entry);
  REQUIRE(inline_env);
  CHECK(inline_env->text == "[mcp_servers.tmcra]\ncommand = \"" + kBin +
                                "\"\nenv = { A = \"b\", TMCRA_HOOKS = \"codex\" } # mine\n");
  auto sub_table = AddServer(
      "[mcp_servers.tmcra]\ncommand = \"" + kBin + "\"\n\n[mcp_servers.tmcra.env]\nA = \"b\"\n",
      ConfigFormat::kCodexToml, entry);
  REQUIRE(sub_table);
  CHECK(sub_table->text ==
        "[mcp_servers.tmcra]\ncommand = \"" + kBin +
            "\"\n\n[mcp_servers.tmcra.env]\nTMCRA_HOOKS = \"codex\"\nA = \"b\"\n");
  auto replaced = AddServer("[mcp_servers.tmcra]\ncommand = \"" + kBin +
                                "\"\n[mcp_servers.tmcra.env]\nTMCRA_HOOKS = \"x\"\n",
                            ConfigFormat::kCodexToml, entry);
  REQUIRE(replaced);
  CHECK(replaced->text.find("TMCRA_HOOKS = \"codex\"") != std::string::npos);
  CHECK(tmcra::setup::EntrySnippet(ConfigFormat::kCodexToml, entry)
            .find("env = { TMCRA_HOOKS = \"codex\" }") != std::string::npos);
}

TEST_CASE("Codex trust: hooks.state tables added, updated, and removed byte for byte",
          "[setup][hooks]") {
  using tmcra::setup::HookTrust;
  const std::string base = "model = \"gpt-5\"\n\n[mcp_servers.other]\ncommand = \"/bin/true\"\n";
  const std::vector<HookTrust> trusts = {{"/h/.codex/hooks.json:stop:0:0", "sha256:aa"},
                                         {"/h/.codex/hooks.json:session_end:0:0", "sha256:bb"}};
  auto set = tmcra::setup::SetHookTrust(base, trusts);
  REQUIRE(set);
  CHECK(set->text == base +
                         "\n[hooks.state.\"/h/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = "
                         "\"sha256:aa\"\n\n[hooks.state.\"/h/.codex/hooks.json:session_end:0:0\"]"
                         "\ntrusted_hash = \"sha256:bb\"\n");
  auto same = tmcra::setup::SetHookTrust(set->text, trusts);
  REQUIRE(same);
  CHECK(same->outcome == EditOutcome::kUnchanged);
  auto changed = tmcra::setup::SetHookTrust(set->text, {{trusts[0].key, "sha256:cc"}});
  REQUIRE(changed);
  CHECK(changed->text.find("trusted_hash = \"sha256:cc\"") != std::string::npos);
  CHECK(changed->text.find("sha256:aa") == std::string::npos);

  std::vector<std::string> keys = {trusts[0].key, trusts[1].key, "/other:stop:0:0"};
  auto removed = tmcra::setup::RemoveHookTrust(set->text, keys);
  REQUIRE(removed);
  CHECK(removed->text == base);
  auto absent = tmcra::setup::RemoveHookTrust(base, keys);
  REQUIRE(absent);
  CHECK(absent->outcome == EditOutcome::kAbsent);

  // A user's own trust entry and [features] stay.
  const std::string users =
      "[features]\nhooks = true\n\n[hooks.state.\"/mine:stop:0:0\"]\n"
      "trusted_hash = \"sha256:dd\"\n";
  auto beside = tmcra::setup::SetHookTrust(users, trusts);
  REQUIRE(beside);
  auto back = tmcra::setup::RemoveHookTrust(beside->text, keys);
  REQUIRE(back);
  CHECK(back->text == users);
  CHECK_FALSE(*tmcra::setup::CodexHooksDisabled(users));
  CHECK(*tmcra::setup::CodexHooksDisabled("[features]\nhooks = false\n"));
  CHECK(*tmcra::setup::CodexHooksDisabled("[features]\ncodex_hooks = false\n"));
  CHECK_FALSE(tmcra::setup::SetHookTrust("hooks = 1\n", trusts));
}
