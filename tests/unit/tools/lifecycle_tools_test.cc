// The turn lifecycle and tmcra_ingest through the protocol layer, over the real embedded engine
// and a real outbox on a temp dir: what a host is told about a write is what was stored.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "src/api/embedded_memory_api.h"
#include "src/tools/memory_tools.h"
#include "src/tools/outbox_sender.h"
#include "tests/support/pipe_session.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::testing::PipeSession;
using tmcra::testing::TempDir;

namespace {

struct Fixture {
  TempDir dir;
  std::unique_ptr<tmcra::api::EmbeddedMemoryApi> memory;
  std::unique_ptr<tmcra::tools::MemoryApiSender> sender;
  std::unique_ptr<tmcra::queue::DeliveryService> delivery;
  std::unique_ptr<PipeSession> session;
  int next_id = 1;

  explicit Fixture(const std::string& hooks_host = "") {
    tmcra::memory::EngineOptions options;
    options.path = dir.File("memory.db");
    memory = std::make_unique<tmcra::api::EmbeddedMemoryApi>(options);
    sender = std::make_unique<tmcra::tools::MemoryApiSender>(*memory);
    tmcra::queue::DeliveryOptions delivery_options;
    delivery_options.path = dir.File("outbox.sqlite3");
    delivery_options.owner = "pid-" + std::to_string(getpid()) + "-lifecycle-test";
    delivery = std::make_unique<tmcra::queue::DeliveryService>(delivery_options, *sender, nullptr);
    auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
    tmcra::tools::MemoryToolDeps deps;
    deps.memory = memory.get();
    deps.default_scope = "personal";
    deps.version = "0.1.0";
    deps.delivery = delivery.get();
    deps.commit_wait = std::chrono::seconds(10);
    deps.hooks_host = hooks_host;
    tmcra::tools::RegisterMemoryTools(server->tools(), deps);
    tmcra::tools::RegisterLifecycleTools(server->tools(), deps);
    session = std::make_unique<PipeSession>(std::move(server));
    session->Initialize("2025-11-25");
  }
  ~Fixture() {
    session.reset();
    delivery->Stop();
  }

  json Call(const std::string& tool, const json& args) {
    json r = session->Call(next_id++, "tools/call", {{"name", tool}, {"arguments", args}});
    return r["result"];
  }
  json Figures() { return *memory->Stats(); }
  tmcra::queue::Outbox& Outbox() { return **delivery->outbox(); }
};

std::string Text(const json& result) { return result["content"][0]["text"].get<std::string>(); }

json CommitArgs(const std::string& message_id, const std::string& content,
                const std::string& consistency = "read_your_writes") {
  return {{"turn_id", "turn-1"},
          {"assistant_message_id", message_id},
          {"assistant_content", content},
          {"consistency", consistency}};
}

}  // namespace

TEST_CASE("a committed turn refuses a different answer and replays the same one",
          "[tools][lifecycle]") {
  const std::string consistency = GENERATE("read_your_writes", "eventual");
  INFO(consistency);
  Fixture f;
  const json prepare =
      f.Call("tmcra_turn_prepare", {{"turn_id", "turn-1"},
                                    {"session_id", "s1"},
                                    {"user_message_id", "u1"},
                                    {"user_content", "Which port does osprey use?"}});
  REQUIRE_FALSE(prepare.contains("isError"));
  const json first = f.Call("tmcra_turn_commit", CommitArgs("a1", "Port 8443.", consistency));
  REQUIRE_FALSE(first.contains("isError"));
  const std::string item_id = first["structuredContent"]["item_id"];

  // Another answer for the same turn: refused, naming the turn and both messages, whether the
  // first is still pending (eventual) or already delivered (read_your_writes).
  for (const json& other :
       {CommitArgs("a2", "Port 9000.", consistency), CommitArgs("a1", "Port 9000.", consistency),
        CommitArgs("a2", "Port 8443.", consistency)}) {
    INFO(other.dump());
    const json refused = f.Call("tmcra_turn_commit", other);
    CHECK(refused.value("isError", false));
    CHECK_FALSE(refused.contains("structuredContent"));
    const std::string text = Text(refused);
    CHECK(text.find("Error executing tool tmcra_turn_commit: turn turn-1 already has a committed "
                    "answer (assistant message \"a1\")") == 0);
    CHECK(text.find("a different assistant message (\"" +
                    other["assistant_message_id"].get<std::string>() + "\")") != std::string::npos);
  }

  // The same answer again (a retry after a crash, with a new derived key since it has no
  // timestamp): the same item, succeeded once delivered.
  const json replay = f.Call("tmcra_turn_commit", CommitArgs("a1", "Port 8443."));
  REQUIRE_FALSE(replay.contains("isError"));
  CHECK(replay["structuredContent"]["item_id"] == item_id);
  CHECK(replay["structuredContent"]["final_status"] == "succeeded");
  const auto counts = f.Outbox().GetCounts();
  CHECK(counts->pending + counts->submitted + counts->succeeded + counts->dead_letter == 1);
  CHECK(f.Figures()["records"] == 2);
  const json recall = f.Call("tmcra_recall", {{"query", "osprey port"}});
  const std::string content = recall["structuredContent"]["prompt_evidence"]["content"];
  CHECK(content.find("Port 8443.") != std::string::npos);
  CHECK(content.find("Port 9000.") == std::string::npos);
}

TEST_CASE("tmcra_ingest refuses a reused idempotency key with another body", "[tools][lifecycle]") {
  Fixture f;
  const json args = {{"session_id", "s1"},
                     {"idempotency_key", "ingest-key-reused"},
                     {"messages",
                      {{{"message_id", "m1"},
                        {"role", "user"},
                        {"content", "The build host is kestrel."},
                        {"timestamp", "2026-07-15T00:00:00Z"}}}}};
  const json first = f.Call("tmcra_ingest", args);
  REQUIRE_FALSE(first.contains("isError"));
  const json same = f.Call("tmcra_ingest", args);
  REQUIRE_FALSE(same.contains("isError"));
  CHECK(same["structuredContent"]["job_id"] == first["structuredContent"]["job_id"]);
  json other = args;
  other["messages"][0]["content"] = "The build host is merlin.";
  const json refused = f.Call("tmcra_ingest", other);
  CHECK(refused.value("isError", false));
  CHECK(Text(refused) ==
        "Error executing tool tmcra_ingest: idempotency key is already bound to "
        "a different ingest");
  const auto counts = f.Outbox().GetCounts();
  CHECK(counts->pending + counts->submitted + counts->succeeded == 1);
}

TEST_CASE("with the host's hooks running the lifecycle, the turn tools write nothing and say so",
          "[tools][lifecycle]") {
  Fixture f("codex");
  const json prepared = f.Call("tmcra_turn_prepare", {{"turn_id", "turn-1"},
                                                      {"session_id", "s"},
                                                      {"user_message_id", "u1"},
                                                      {"user_content", "hello there"}});
  CHECK_FALSE(prepared.value("isError", false));
  CHECK(prepared["structuredContent"]["status"] == "handled_by_hooks");
  CHECK(prepared["structuredContent"]["host"] == "codex");
  const json committed = f.Call("tmcra_turn_commit", CommitArgs("a1", "an answer"));
  CHECK(committed["structuredContent"]["handled_by_hooks"] == true);
  CHECK(committed["structuredContent"]["submitted"] == false);
  CHECK_FALSE(*f.Outbox().GetTurn("turn-1"));
  CHECK(f.Figures()["records"] == 0);
  // The other tools work as before.
  const json ingested =
      f.Call("tmcra_ingest",
             {{"session_id", "s"},
              {"consistency", "read_your_writes"},
              {"messages", {{{"message_id", "m1"}, {"role", "user"}, {"content", "kept"}}}}});
  CHECK_FALSE(ingested.value("isError", false));
  // The ingest's job runs on the engine's worker: wait for it before counting records.
  const json waited = f.Call("tmcra_wait_job", {{"job_id", ingested["structuredContent"]["job_id"]},
                                                {"poll_interval_seconds", 0.1}});
  CHECK_FALSE(waited.value("isError", false));
  CHECK(f.Figures()["records"] == 1);
}
