// tmcra_memory_control through the protocol layer, over real control files in a temp dir.
#include "src/tools/control_tool.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "tests/support/pipe_session.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::Sha256Hex;
using tmcra::controls::ControlStore;
using tmcra::testing::PipeSession;
using tmcra::testing::TempDir;

namespace {

constexpr char kTool[] = "tmcra_memory_control";

std::string KeyFor(const std::string& scope) {
  return tmcra::controls::ControlKey("https://memory.example", "secret", scope);
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<ControlStore> store;
  std::unique_ptr<PipeSession> session;
  int next_id = 1;

  explicit Fixture(
      std::string default_scope = "personal", std::function<json()> delivery = [] {
        return json{{"pending", 2}, {"dead_letter", 0}};
      }) {
    store = std::make_unique<ControlStore>(dir.File("controls"));
    auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
    tmcra::tools::ControlToolDeps deps;
    deps.store = store.get();
    deps.control_key = KeyFor;
    deps.default_scope = std::move(default_scope);
    deps.delivery = std::move(delivery);
    tmcra::tools::RegisterControlTool(server->tools(), deps);
    session = std::make_unique<PipeSession>(std::move(server));
    session->Initialize("2025-11-25");
  }
  ~Fixture() { session.reset(); }

  json Call(const json& args) {
    json r = session->Call(next_id++, "tools/call", {{"name", kTool}, {"arguments", args}});
    return r["result"];
  }
  json Ok(const json& args) {
    json r = Call(args);
    INFO(r.dump());
    REQUIRE_FALSE(r.contains("isError"));
    // The text is the same object, for hosts without structuredContent.
    CHECK(json::parse(r["content"][0]["text"].get<std::string>()) == r["structuredContent"]);
    return r["structuredContent"];
  }
  std::string Fail(const json& args) {
    json r = Call(args);
    INFO(r.dump());
    REQUIRE(r["isError"] == true);
    return r["content"][0]["text"].get<std::string>();
  }
};

}  // namespace

TEST_CASE("tmcra_memory_control: is listed with TMCRA's description and a closed schema",
          "[tools][controls]") {
  Fixture f;
  json list = f.session->Call(99, "tools/list")["result"]["tools"];
  REQUIRE(list.size() == 1);
  const json tool = list[0];
  CHECK(tool["name"] == kTool);
  CHECK(tool["description"] ==
        "Inspect memory or apply an explicitly requested session mode, task update or recall "
        "budget. Use exact session_id; normal, recall_only and off are supported. Mark task "
        "completion only when intended.");
  const json schema = tool["inputSchema"];
  CHECK(schema["additionalProperties"] == false);
  CHECK(schema["required"] == json::array({"session_id", "operation"}));
  CHECK(schema["properties"]["operation"]["enum"] ==
        json::array({"dashboard", "mode", "budget", "task", "correction_start"}));
  CHECK(schema["properties"]["scope"]["default"].is_null());
  CHECK(schema["properties"]["arguments"]["default"].is_null());
  CHECK(tool["outputSchema"] == json{{"type", "object"}, {"additionalProperties", true}});
  CHECK(tool["annotations"]["readOnlyHint"] == false);
  CHECK(tool["annotations"]["openWorldHint"] == false);
}

TEST_CASE("tmcra_memory_control: each operation through the tool", "[tools][controls]") {
  Fixture f;
  const json dash = f.Ok({{"session_id", "s1"}, {"operation", "dashboard"}});
  CHECK(dash["policy"]["sessionId"] == "s1");
  CHECK_FALSE(dash["policy"].contains("key"));
  CHECK(dash["budgetChars"] == 12000);
  CHECK(dash["tasks"].empty());
  CHECK(dash["recent"].empty());
  CHECK(dash["delivery"] == json{{"pending", 2}, {"dead_letter", 0}});

  CHECK(f.Ok({{"session_id", "s1"}, {"operation", "mode"}, {"arguments", {{"mode", "off"}}}}) ==
        json{{"mode", "off"}, {"generation", 1}, {"disabledContentBackfill", false}});
  CHECK(f.Ok({{"session_id", "s1"},
              {"operation", "mode"},
              {"arguments", {{"mode", "normal"}}},
              {"scope", nullptr}})["generation"] == 2);
  CHECK(f.Ok({{"session_id", "s1"},
              {"operation", "budget"},
              {"arguments", {{"budgetChars", 20000}}}}) == json{{"budgetChars", 20000}});
  const json task = f.Ok({{"session_id", "s1"},
                          {"operation", "task"},
                          {"arguments", {{"objective", "Ship it"}, {"nextStep", "tests"}}}});
  CHECK(task["objective"] == "Ship it");
  CHECK(task["status"] == "active");
  const json done = f.Ok({{"session_id", "s1"},
                          {"operation", "task"},
                          {"arguments", {{"id", task["id"]}, {"status", "completed"}}}});
  CHECK(done["status"] == "completed");
  CHECK(done["nextStep"] == "tests");
  CHECK(f.Ok({{"session_id", "s1"}, {"operation", "correction_start"}, {"arguments", nullptr}}) ==
        json{{"automaticCapture", "suppressed"},
             {"turnIdentified", false},
             {"originalMemoryChanged", false}});

  const json after =
      f.Ok({{"session_id", "s1"}, {"operation", "dashboard"}, {"arguments", json::object()}});
  CHECK(after["policy"]["generation"] == 2);
  CHECK(after["budgetChars"] == 20000);
  REQUIRE(after["tasks"].size() == 1);
  CHECK(after["tasks"][0]["status"] == "completed");

  // The state is the default scope's, keyed as the deps say.
  auto budget = f.store->BudgetChars(KeyFor("personal"));
  REQUIRE(budget);
  CHECK(*budget == 20000);
}

TEST_CASE("tmcra_memory_control: the scope selects the controls, the session id is exact",
          "[tools][controls]") {
  Fixture f;
  REQUIRE(f.Ok({{"session_id", "s"},
                {"operation", "budget"},
                {"scope", "work"},
                {"arguments", {{"budgetChars", 5000}}}}) == json{{"budgetChars", 5000}});
  CHECK(*f.store->BudgetChars(KeyFor("work")) == 5000);
  CHECK(*f.store->BudgetChars(KeyFor("personal")) == 12000);
  CHECK(
      f.Ok({{"session_id", "s"}, {"operation", "dashboard"}, {"scope", " work "}})["budgetChars"] ==
      5000);
  // " s" and "s" are different sessions (TMCRA hashes the exact id).
  f.Ok({{"session_id", " s"}, {"operation", "mode"}, {"arguments", {{"mode", "off"}}}});
  CHECK(f.Ok({{"session_id", "s"}, {"operation", "dashboard"}})["policy"]["mode"] == "normal");
  CHECK(f.Ok({{"session_id", " s"}, {"operation", "dashboard"}})["policy"]["mode"] == "off");
}

TEST_CASE("tmcra_memory_control: errors name the field or carry TMCRA's message",
          "[tools][controls]") {
  Fixture f;
  const std::string prefix = "Error executing tool tmcra_memory_control: ";
  struct Case {
    json args;
    std::string expected;  // a substring of the error text
  };
  const std::vector<Case> cases = {
      {{{"operation", "dashboard"}}, "arguments.session_id"},
      {{{"session_id", ""}, {"operation", "dashboard"}}, "arguments.session_id"},
      {{{"session_id", 5}, {"operation", "dashboard"}}, "arguments.session_id"},
      {{{"session_id", "s"}}, "arguments.operation"},
      {{{"session_id", "s"}, {"operation", "reset"}}, "arguments.operation"},
      {{{"session_id", "s"}, {"operation", "mode"}, {"arguments", "off"}}, "arguments.arguments"},
      {{{"session_id", "s"}, {"operation", "mode"}, {"arguments", json::array()}},
       "arguments.arguments"},
      {{{"session_id", "s"}, {"operation", "dashboard"}, {"extra", 1}}, "arguments.extra"},
      {{{"session_id", "s"}, {"operation", "dashboard"}, {"scope", "bad scope!"}},
       prefix + "arguments.scope"},
      {{{"session_id", "s"}, {"operation", "dashboard"}, {"scope", 7}}, "arguments.scope"},
      {{{"session_id", "   "}, {"operation", "dashboard"}},
       prefix + "Exact session_id is required"},
      {{{"session_id", "s"}, {"operation", "mode"}}, prefix + "Invalid memory mode"},
      {{{"session_id", "s"}, {"operation", "mode"}, {"arguments", {{"mode", "silent"}}}},
       prefix + "Invalid memory mode"},
      {{{"session_id", "s"}, {"operation", "budget"}, {"arguments", {{"budgetChars", true}}}},
       prefix + "budgetChars must be 1000..64000"},
      {{{"session_id", "s"}, {"operation", "budget"}, {"arguments", {{"budgetChars", 100}}}},
       prefix + "budgetChars must be 1000..64000"},
      {{{"session_id", "s"}, {"operation", "task"}, {"arguments", {{"id", "task_nope"}}}},
       prefix + "Unknown task in this scope"},
      {{{"session_id", "s"}, {"operation", "task"}, {"arguments", {{"objective", " "}}}},
       prefix + "Task objective and valid status required"},
  };
  for (const Case& c : cases) {
    INFO(c.args.dump());
    const std::string text = f.Fail(c.args);
    CHECK(text.find(c.expected) != std::string::npos);
  }
  // Task capture follows the session's mode.
  f.Ok({{"session_id", "q"}, {"operation", "mode"}, {"arguments", {{"mode", "recall_only"}}}});
  CHECK(f.Fail({{"session_id", "q"}, {"operation", "task"}, {"arguments", {{"objective", "o"}}}}) ==
        prefix + "Task capture is disabled");
  // Nothing above changed the default scope's budget or tasks.
  const json dash = f.Ok({{"session_id", "s"}, {"operation", "dashboard"}});
  CHECK(dash["budgetChars"] == 12000);
  CHECK(dash["tasks"].empty());
}

TEST_CASE(
    "tmcra_memory_control: without a default scope the call must name one, delivery may be absent",
    "[tools][controls]") {
  Fixture f("", nullptr);
  CHECK(f.Fail({{"session_id", "s"}, {"operation", "dashboard"}}) ==
        "Error executing tool tmcra_memory_control: arguments.scope: scope is required when "
        "TMCRA_DEFAULT_SCOPE is not set");
  const json dash = f.Ok({{"session_id", "s"}, {"operation", "dashboard"}, {"scope", "team"}});
  CHECK(dash["delivery"] == json::object());
}

TEST_CASE("tmcra_memory_control: a busy lock is a tool error with TMCRA's message",
          "[tools][controls]") {
  Fixture f;
  const std::string root = f.dir.File("controls");
  f.Ok({{"session_id", "s"}, {"operation", "budget"}, {"arguments", {{"budgetChars", 2000}}}});
  const std::string lock = root + "/" + KeyFor("personal") + ".lock";
  { std::ofstream(lock).flush(); }  // a fresh lock of TMCRA's JS/Python: respected
  CHECK(
      f.Fail(
          {{"session_id", "s"}, {"operation", "budget"}, {"arguments", {{"budgetChars", 3000}}}}) ==
      "Error executing tool tmcra_memory_control: Memory controls busy; inspect the local lock");
  // The dashboard only reads.
  CHECK(f.Ok({{"session_id", "s"}, {"operation", "dashboard"}})["budgetChars"] == 2000);
  std::remove(lock.c_str());
  CHECK(f.Ok({{"session_id", "s"},
              {"operation", "budget"},
              {"arguments", {{"budgetChars", 3000}}}}) == json{{"budgetChars", 3000}});
}
