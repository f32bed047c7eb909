// Editing host configs (setup/config_edit.h): only our entry changes, comments and layout of
// the rest stay, and whatever cannot be edited safely is refused with a position, never with
// the file's content.
#include "setup/config_edit.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

using tmcra::setup::AddServer;
using tmcra::setup::ConfigFormat;
using tmcra::setup::EditOutcome;
using tmcra::setup::FindServer;
using tmcra::setup::RemoveServer;
using tmcra::setup::ServerEntry;

namespace {

ServerEntry Entry(std::string command = "/usr/local/bin/tmcra-mcp") {
  ServerEntry e;
  e.name = "tmcra";
  e.command = std::move(command);
  return e;
}

ServerEntry CodexEntry(std::string command = "/usr/local/bin/tmcra-mcp") {
  ServerEntry e = Entry(std::move(command));
  e.env_vars = {"TMCRA_API_KEY", "TMCRA_DATA_DIR"};
  e.tool_timeout_sec = 180;
  return e;
}

nlohmann::ordered_json Json(const std::string& text) { return nlohmann::ordered_json::parse(text); }

}  // namespace

TEST_CASE("JSON: an empty or missing file gets the container and the entry", "[setup][json]") {
  for (const std::string text : {"", "  \n", "{}"}) {
    auto edited = AddServer(text, ConfigFormat::kJsonMcpServers, Entry());
    REQUIRE(edited);
    CHECK(edited->outcome == EditOutcome::kAdded);
    CHECK((edited->text.back() == '\n') == (text != "{}"));  // the final newline state kept
    CHECK(Json(edited->text) ==
          Json(R"({"mcpServers":{"tmcra":{"command":"/usr/local/bin/tmcra-mcp","args":[]}}})"));
  }
  ServerEntry typed = Entry();
  typed.typed = true;
  auto vscode = AddServer("", ConfigFormat::kJsonServers, typed);
  REQUIRE(vscode);
  CHECK(Json(vscode->text) == Json(R"({"servers":{"tmcra":{"type":"stdio",)"
                                   R"("command":"/usr/local/bin/tmcra-mcp","args":[]}}})"));
}

TEST_CASE("JSON: other keys keep their order and values, the indent is the file's",
          "[setup][json]") {
  const std::string text =
      "{\n    \"zeta\": 1.5,\n    \"mcpServers\": {\n        \"other\": {\"command\": \"/bin/x\", "
      "\"env\": {\"TOKEN\": \"s\"}}\n    },\n    \"alpha\": [1, 2, {\"é\": \"ü\"}]\n}\n";
  auto edited = AddServer(text, ConfigFormat::kJsonMcpServers, Entry("/opt/çà/tmcra-mcp"));
  REQUIRE(edited);
  CHECK(edited->outcome == EditOutcome::kAdded);
  const auto doc = Json(edited->text);
  std::vector<std::string> keys;
  for (auto it = doc.begin(); it != doc.end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"zeta", "mcpServers", "alpha"});
  CHECK(doc["mcpServers"].begin().key() == "other");
  CHECK(doc["mcpServers"]["other"] == Json(R"({"command": "/bin/x", "env": {"TOKEN": "s"}})"));
  CHECK(doc["alpha"] == Json(R"([1, 2, {"é": "ü"}])"));
  CHECK(doc["mcpServers"]["tmcra"]["command"] == "/opt/çà/tmcra-mcp");
  CHECK(edited->text.find("\n    \"zeta\"") != std::string::npos);  // 4 spaces kept
  CHECK(edited->text.find("çà") != std::string::npos);              // UTF-8 as is

  auto tabbed = AddServer("{\n\t\"a\": 1\n}\n", ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE(tabbed);
  CHECK(tabbed->text.find("\n\t\"mcpServers\": {\n\t\t\"tmcra\"") != std::string::npos);
}

TEST_CASE("JSON: an existing entry is updated in place, its env kept, the same one unchanged",
          "[setup][json]") {
  const std::string text =
      R"({"mcpServers": {"tmcra": {"command": "/old/tmcra-mcp", "args": ["--x"], )"
      R"("env": {"TMCRA_DATA_DIR": "/d"}}}})";
  auto edited = AddServer(text, ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE(edited);
  CHECK(edited->outcome == EditOutcome::kUpdated);
  CHECK(Json(edited->text)["mcpServers"]["tmcra"] ==
        Json(R"({"command": "/usr/local/bin/tmcra-mcp", "args": [], )"
             R"("env": {"TMCRA_DATA_DIR": "/d"}})"));
  auto again = AddServer(edited->text, ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE(again);
  CHECK(again->outcome == EditOutcome::kUnchanged);
  CHECK(again->text == edited->text);
}

TEST_CASE("JSON: comments, bad JSON and wrong shapes are refused without quoting the file",
          "[setup][json]") {
  const std::string secret = "sk-live-0123456789";
  auto comments =
      AddServer("{\n  // mine\n  \"mcpServers\": {}\n}\n", ConfigFormat::kJsonServers, Entry());
  REQUIRE_FALSE(comments);
  CHECK(comments.error().message.find("comments") != std::string::npos);

  auto bad = AddServer("{\n  \"mcpServers\": {\"x\": {\"env\": {\"T\": \"" + secret + "\"}}},\n}\n",
                       ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("not valid JSON (at line 3, column 1)") != std::string::npos);
  CHECK(bad.error().message.find(secret) == std::string::npos);

  for (const std::string text :
       {"[1]", R"({"mcpServers": []})", R"({"mcpServers": {"tmcra": 3}})"}) {
    auto refused = AddServer(text, ConfigFormat::kJsonMcpServers, Entry());
    REQUIRE_FALSE(refused);
    CHECK_FALSE(refused.error().retryable);
  }
  auto invalid_utf8 = AddServer("{\"a\": \"\xff\"}", ConfigFormat::kJsonMcpServers, Entry());
  CHECK_FALSE(invalid_utf8);
}

TEST_CASE("JSON: remove and find", "[setup][json]") {
  const std::string text = R"({"servers": {"a": {"command": "/a"}, "tmcra": {"command": "/t"}, )"
                           R"("b": {"command": "/b"}}})";
  auto found = FindServer(text, ConfigFormat::kJsonServers, "tmcra");
  REQUIRE(found);
  CHECK(found->present);
  CHECK(found->command == "/t");
  auto removed = RemoveServer(text, ConfigFormat::kJsonServers, "tmcra");
  REQUIRE(removed);
  CHECK(removed->outcome == EditOutcome::kRemoved);
  CHECK(Json(removed->text) ==
        Json(R"({"servers": {"a": {"command": "/a"}, "b": {"command": "/b"}}})"));
  auto absent = RemoveServer(removed->text, ConfigFormat::kJsonServers, "tmcra");
  REQUIRE(absent);
  CHECK(absent->outcome == EditOutcome::kAbsent);
  CHECK(absent->text == removed->text);
  // Reading accepts comments (VS Code's JSONC), editing does not.
  auto jsonc = FindServer("{\n  // c\n  \"servers\": {\"tmcra\": {\"command\": \"/t\"}}\n}",
                          ConfigFormat::kJsonServers, "tmcra");
  REQUIRE(jsonc);
  CHECK(jsonc->command == "/t");
  auto none = FindServer("", ConfigFormat::kJsonMcpServers, "tmcra");
  REQUIRE(none);
  CHECK_FALSE(none->present);
}

TEST_CASE("TOML: a new table goes at the end and every original byte stays", "[setup][toml]") {
  const std::string text =
      "# my settings\nmodel = \"o3\"  # why\n\n[mcp_servers.other]\ncommand = \"/bin/x\"\n\n"
      "[profiles.a]\nmodel = \"mini\"";  // no final newline
  auto edited = AddServer(text, ConfigFormat::kCodexToml, CodexEntry());
  REQUIRE(edited);
  CHECK(edited->outcome == EditOutcome::kAdded);
  CHECK(edited->text.rfind(text, 0) == 0);
  CHECK(edited->text.substr(text.size()) ==
        "\n\n[mcp_servers.tmcra]\ncommand = \"/usr/local/bin/tmcra-mcp\"\nenv_vars = [\n"
        "  \"TMCRA_API_KEY\",\n  \"TMCRA_DATA_DIR\",\n]\ntool_timeout_sec = 180\n");
  auto found = FindServer(edited->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(found);
  CHECK(found->command == "/usr/local/bin/tmcra-mcp");
  auto empty = AddServer("", ConfigFormat::kCodexToml, Entry());
  REQUIRE(empty);
  CHECK(empty->text == "[mcp_servers.tmcra]\ncommand = \"/usr/local/bin/tmcra-mcp\"\n");
}

TEST_CASE("TOML: an existing table is edited where its values are, the user's keys kept",
          "[setup][toml]") {
  const std::string text =
      "[mcp_servers.tmcra]  # memory\ncommand = \"/opt/é/old\"   # was here\nargs = [\n  "
      "\"--x\",\n]\n"
      "env_vars = [\"MINE\"]\n\n[mcp_servers.tmcra.tools.tmcra_feedback]\napproval_mode = "
      "\"prompt\"\n";
  auto edited = AddServer(text, ConfigFormat::kCodexToml, CodexEntry("/usr/bin/tmcra-mcp"));
  REQUIRE(edited);
  CHECK(edited->outcome == EditOutcome::kUpdated);
  CHECK(edited->text ==
        "[mcp_servers.tmcra]  # memory\ntool_timeout_sec = 180\ncommand = \"/usr/bin/tmcra-mcp\"   "
        "# was here\nargs = []\nenv_vars = [\"MINE\"]\n\n[mcp_servers.tmcra.tools.tmcra_feedback]\n"
        "approval_mode = \"prompt\"\n");
  auto again = AddServer(edited->text, ConfigFormat::kCodexToml, CodexEntry("/usr/bin/tmcra-mcp"));
  REQUIRE(again);
  CHECK(again->outcome == EditOutcome::kUnchanged);
  CHECK(again->text == edited->text);
}

TEST_CASE("TOML: CRLF files get CRLF lines, odd commands are escaped", "[setup][toml]") {
  auto crlf = AddServer("[mcp_servers.tmcra]\r\nargs = []\r\n", ConfigFormat::kCodexToml, Entry());
  REQUIRE(crlf);
  CHECK(crlf->text ==
        "[mcp_servers.tmcra]\r\ncommand = \"/usr/local/bin/tmcra-mcp\"\r\nargs = []\r\n");
  const std::string odd = "/opt/a \"b\"\\c\t/tmcra-mcp";
  auto escaped = AddServer("", ConfigFormat::kCodexToml, Entry(odd));
  REQUIRE(escaped);
  auto found = FindServer(escaped->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(found);
  CHECK(found->command == odd);
}

TEST_CASE("TOML: inline tables, dotted keys and bad TOML are refused", "[setup][toml]") {
  const std::string secret = "sk-live-0123456789";
  for (const std::string text :
       {"mcp_servers = { other = { command = \"/x\" } }\n", "mcp_servers.tmcra.command = \"/x\"\n",
        "[mcp_servers]\ntmcra = { command = \"/x\" }\n", "[mcp_servers]\ntmcra.command = \"/x\"\n",
        "mcp_servers = 3\n"}) {
    auto refused = AddServer(text, ConfigFormat::kCodexToml, Entry());
    INFO(text);
    REQUIRE_FALSE(refused);
  }
  auto bad =
      AddServer("a = 1\n[x]\ntoken = \"" + secret + "\" junk\n", ConfigFormat::kCodexToml, Entry());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("not valid TOML (at line 3") != std::string::npos);
  CHECK(bad.error().message.find(secret) == std::string::npos);
}

TEST_CASE("TOML: remove takes the table and its sub-tables, add then remove gives the original",
          "[setup][toml]") {
  const std::string original =
      "# top\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"/bin/x\"\n\n[profiles.a]\nx = 1\n";
  auto added = AddServer(original, ConfigFormat::kCodexToml, CodexEntry());
  REQUIRE(added);
  auto removed = RemoveServer(added->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(removed);
  CHECK(removed->outcome == EditOutcome::kRemoved);
  CHECK(removed->text == original);

  const std::string middle =
      "[mcp_servers.a]\ncommand = \"/a\"\n\n[mcp_servers.tmcra]\ncommand = \"/t\"\n\n"
      "[mcp_servers.tmcra.tools.x]\napproval_mode = \"prompt\"\n\n[mcp_servers.b]\ncommand = "
      "\"/b\"\n";
  auto cut = RemoveServer(middle, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(cut);
  CHECK(cut->text == "[mcp_servers.a]\ncommand = \"/a\"\n\n[mcp_servers.b]\ncommand = \"/b\"\n");
  auto absent = RemoveServer(cut->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(absent);
  CHECK(absent->outcome == EditOutcome::kAbsent);
  CHECK_FALSE(RemoveServer("mcp_servers = { tmcra = { command = \"/x\" } }\n",
                           ConfigFormat::kCodexToml, "tmcra"));
}

TEST_CASE("server names are TOML bare keys of at most 64 characters", "[setup]") {
  CHECK(tmcra::setup::IsValidServerName("tmcra"));
  CHECK(tmcra::setup::IsValidServerName("tmcra-work_2"));
  CHECK_FALSE(tmcra::setup::IsValidServerName(""));
  CHECK_FALSE(tmcra::setup::IsValidServerName("a.b"));
  CHECK_FALSE(tmcra::setup::IsValidServerName("a b"));
  CHECK_FALSE(tmcra::setup::IsValidServerName(std::string(65, 'a')));
  CHECK_FALSE(
      AddServer("", ConfigFormat::kCodexToml, ServerEntry{"a]b", "/x", false, {}, 0, {}, {}}));
}

TEST_CASE("TOML: removing the only server leaves no mcp_servers behind", "[setup][toml]") {
  auto only =
      RemoveServer("[mcp_servers.tmcra]\ncommand = \"/t\"\n", ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(only);
  CHECK(only->text.empty());
  auto header = RemoveServer("[mcp_servers]\n\n[mcp_servers.tmcra]\ncommand = \"/t\"\n",
                             ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(header);
  CHECK(header->text == "[mcp_servers]\n");
}

TEST_CASE("TOML: remove keeps the next table's comments and every line outside the table",
          "[setup][toml]") {
  const std::string next =
      "[mcp_servers.tmcra]\ncommand = \"x\"\n\n# GitHub server (token rotates)\n# [old]\n"
      "[mcp_servers.github]\ncommand = \"gh\"\n";
  auto kept = RemoveServer(next, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(kept);
  CHECK(kept->text ==
        "# GitHub server (token rotates)\n# [old]\n[mcp_servers.github]\ncommand = \"gh\"\n");

  // Blank lines and multi-line strings elsewhere are not touched; install then remove is exact.
  for (const std::string& original :
       {std::string("model = \"o3\"\n\n\n[profiles.x]\na = 1\n"), std::string("model = \"o3\"\n\n"),
        std::string("developer_instructions = \"\"\"\nBe terse.\n\n\nNever push.\n\"\"\"\n"),
        std::string("[mcp_servers.a]\ncommand = \"/a\"\n\n\n# end\n")}) {
    INFO(original);
    auto added = AddServer(original, ConfigFormat::kCodexToml, CodexEntry());
    REQUIRE(added);
    auto removed = RemoveServer(added->text, ConfigFormat::kCodexToml, "tmcra");
    REQUIRE(removed);
    CHECK(removed->text == original);
  }
  // Without a final newline the file gets one back (the only byte that differs).
  auto added = AddServer("model = \"o3\"", ConfigFormat::kCodexToml, CodexEntry());
  REQUIRE(added);
  auto removed = RemoveServer(added->text, ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(removed);
  CHECK(removed->text == "model = \"o3\"\n");
  // A table in the middle: the blank lines on either side become one.
  auto middle = RemoveServer("a = 1\n\n[mcp_servers.tmcra]\ncommand = \"x\"\n\n[b]\nc = 2\n",
                             ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(middle);
  CHECK(middle->text == "a = 1\n\n[b]\nc = 2\n");
  auto first = RemoveServer("[mcp_servers.tmcra]\ncommand = \"x\"\n\n[b]\nc = 2\n",
                            ConfigFormat::kCodexToml, "tmcra");
  REQUIRE(first);
  CHECK(first->text == "[b]\nc = 2\n");
}

TEST_CASE("JSON: what could not be written back exactly is refused, CRLF stays CRLF",
          "[setup][json]") {
  auto twice = AddServer(R"({"a": 1, "a": 2})", ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message == "has a key given twice in one object");
  auto nested = AddServer(R"({"x": [{"a": 1}, {"a": 2}], "y": {"a": 1, "b": {"a": 2}}})",
                          ConfigFormat::kJsonMcpServers, Entry());
  CHECK(nested);  // the same key in different objects is fine
  auto big =
      AddServer(R"({"n": 123456789012345678901234567890})", ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE_FALSE(big);
  CHECK(big.error().message == "has an integer too large to be written back exactly");
  CHECK(AddServer(R"({"n": 18446744073709551615, "m": -9223372036854775808, "f": 1.5e300})",
                  ConfigFormat::kJsonMcpServers, Entry()));
  auto crlf = AddServer("{\r\n  \"a\": 1\r\n}\r\n", ConfigFormat::kJsonMcpServers, Entry());
  REQUIRE(crlf);
  CHECK(crlf->text.find("\r\n  \"a\": 1,\r\n  \"mcpServers\": {\r\n") != std::string::npos);
  CHECK(crlf->text.find("\r\r") == std::string::npos);
  CHECK(crlf->text.size() >= 2);
  CHECK(crlf->text.substr(crlf->text.size() - 2) == "\r\n");
}
