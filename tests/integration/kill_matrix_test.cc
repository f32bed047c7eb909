// The kill matrix: the real tmcra-mcp, SIGKILLed by a named failpoint at each step of a write,
// restarted, delivery allowed to finish. Pass rule: no acknowledged turn lost, none written
// twice (each message stored once, one job per outbox item), and PRAGMA integrity_check ok on
// both SQLite files. Failpoints exist only in test builds (TMCRA_FAILPOINTS).
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "base/sqlite_db.h"
#include "queue/outbox.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

using namespace std::chrono_literals;
using json = nlohmann::json;
using tmcra::testing::Subprocess;
using tmcra::testing::TempDir;

namespace {

std::map<std::string, std::string> ServerEnv(const TempDir& home, const std::string& failpoints) {
  return {{"HOME", home.path()},
          {"TMCRA_DATA_DIR", home.File("data")},
          {"TMCRA_MEMORY_STATE_DIR", home.File("controls")},
          {"TMCRA_LOG_LEVEL", "warn"},
          {"TMCRA_FAILPOINTS", failpoints}};
}

json InitializeParams() {
  return {{"protocolVersion", "2025-11-25"},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "kill-matrix"}, {"version", "0"}}}};
}

class Client {
 public:
  Client(const TempDir& home, const std::string& failpoints) {
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{TMCRA_MCP_BIN},
                                            ServerEnv(home, failpoints));
    auto init = Request("initialize", InitializeParams());
    REQUIRE(init.is_object());
    process_->WriteLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }

  // The response's result, or null when the process died before answering.
  json Request(const std::string& method, json params) {
    const int id = next_id_++;
    try {
      process_->WriteLine(
          json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}}
              .dump());
    } catch (const std::exception&) {
      return nullptr;  // stdin closed: the process is gone
    }
    for (;;) {
      auto line = process_->ReadLine(30s);
      if (!line) return nullptr;
      json message = json::parse(*line);
      if (message.contains("id") && message["id"] == id) return message["result"];
    }
  }

  json Tool(const std::string& name, json args) {
    json r = Request("tools/call", {{"name", name}, {"arguments", std::move(args)}});
    if (r.is_null()) return nullptr;
    INFO(name << ": " << r.dump());
    REQUIRE_FALSE(r.value("isError", false));
    return r["structuredContent"];
  }

  // Waits for the process to end; true when it was killed by SIGKILL.
  bool Killed() {
    auto status = process_->Wait(10s);
    return status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL;
  }

  void Close() {
    process_->CloseStdin();
    auto status = process_->Wait(10s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
  }

 private:
  std::unique_ptr<Subprocess> process_;
  int next_id_ = 1;
};

json PrepareArgs(int turn) {
  return {{"turn_id", "turn-" + std::to_string(turn)},
          {"session_id", "kill-session"},
          {"user_message_id", "u" + std::to_string(turn)},
          {"user_content", "user says marker" + std::to_string(turn) + " please remember"}};
}

json CommitArgs(int turn) {
  return {{"turn_id", "turn-" + std::to_string(turn)},
          {"assistant_message_id", "a" + std::to_string(turn)},
          {"assistant_content", "assistant answers marker" + std::to_string(turn)}};
}

int64_t Count(tmcra::db::Database& db, const std::string& sql) {
  auto st = db.Prepare(sql);
  REQUIRE(st);
  auto row = st->Step();
  REQUIRE(row);
  REQUIRE(*row);
  return st->Int(0);
}

std::string Text(tmcra::db::Database& db, const std::string& sql) {
  auto st = db.Prepare(sql);
  REQUIRE(st);
  auto row = st->Step();
  REQUIRE(row);
  REQUIRE(*row);
  return st->Text(0);
}

// A server restarted over what a first crash left pending, to be SIGKILLed again at
// `failpoint` while it delivers it. Background delivery starts with the process (the outbox
// exists), so the failpoint can be reached before the server has answered anything, even the
// initialize request: nothing is asked of it but to die there, by that failpoint. A reconcile is
// requested as well, so the failpoint is reached whichever of the two gets to the item first.
void CrashWhileReconciling(const TempDir& home, const std::string& failpoint) {
  // Writing to a server that already died must fail with EPIPE, not kill the test.
  signal(SIGPIPE, SIG_IGN);
  Subprocess server({TMCRA_MCP_BIN}, ServerEnv(home, failpoint));
  try {
    server.WriteLine(json{
        {"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", InitializeParams()}}
                         .dump());
    server.WriteLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    server.WriteLine(json{{"jsonrpc", "2.0"},
                          {"id", 2},
                          {"method", "tools/call"},
                          {"params", {{"name", "tmcra_reconcile"}, {"arguments", json::object()}}}}
                         .dump());
  } catch (const std::exception&) {
    // stdin closed: the server is gone already
  }
  // A server that survives waits for more requests: the wait times out and the test fails.
  auto status = server.Wait(30s);
  REQUIRE(status);
  CHECK((WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL));
  const std::string name = failpoint.substr(0, failpoint.find(':'));
  INFO("stderr: " << server.Stderr());
  CHECK(server.Stderr().find("failpoint " + name + ": SIGKILL") != std::string::npos);
}

constexpr int kTurns = 3;

// Runs turns until the failpoint kills the process; returns the acknowledged turns.
std::set<int> RunUntilKilled(Client& client, bool use_ingest) {
  std::set<int> acknowledged;
  for (int turn = 1; turn <= kTurns; ++turn) {
    if (use_ingest) {
      json r = client.Tool(
          "tmcra_ingest", {{"session_id", "kill-session"},
                           {"messages",
                            {{{"message_id", "u" + std::to_string(turn)},
                              {"role", "user"},
                              {"content", "user says marker" + std::to_string(turn)},
                              {"timestamp", "2026-07-15T00:00:0" + std::to_string(turn) + "Z"}}}}});
      if (r.is_null()) break;
      acknowledged.insert(turn);
      continue;
    }
    if (client.Tool("tmcra_turn_prepare", PrepareArgs(turn)).is_null()) break;
    json committed = client.Tool("tmcra_turn_commit", CommitArgs(turn));
    if (committed.is_null()) break;
    acknowledged.insert(turn);
  }
  return acknowledged;
}

void Verify(const TempDir& home, const std::set<int>& expected_turns, bool with_assistant) {
  auto memory = tmcra::db::Database::Open({home.File("data/memory.db")});
  auto outbox = tmcra::db::Database::Open({home.File("data/outbox.sqlite3")});
  REQUIRE(memory);
  REQUIRE(outbox);
  CHECK(Text(**memory, "PRAGMA integrity_check") == "ok");
  CHECK(Text(**outbox, "PRAGMA integrity_check") == "ok");
  for (int turn : expected_turns) {
    INFO("turn " << turn);
    CHECK(Count(**memory, "SELECT COUNT(*) FROM records WHERE message_id = 'u" +
                              std::to_string(turn) + "'") == 1);
    if (with_assistant) {
      CHECK(Count(**memory, "SELECT COUNT(*) FROM records WHERE message_id = 'a" +
                                std::to_string(turn) + "'") == 1);
    }
  }
  // Every delivered outbox item produced exactly one job, under its own key.
  CHECK(Count(**outbox, "SELECT COUNT(*) FROM ingest_queue WHERE state <> 'succeeded'") == 0);
  CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs") ==
        Count(**outbox, "SELECT COUNT(*) FROM ingest_queue"));
  CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs WHERE status <> 'succeeded'") == 0);
}

void Recover(const TempDir& home, const std::set<int>& acknowledged, bool use_ingest) {
  // First without any host retry: every acknowledged turn must come back by itself.
  {
    Client client(home, "");
    json r = client.Tool("tmcra_reconcile", json::object());
    for (const auto& item : r["items"]) CHECK(item["status"] == "succeeded");
    client.Close();
  }
  Verify(home, acknowledged, !use_ingest);
  // Then the host retries what it never saw acknowledged, exactly as before.
  Client client(home, "");
  RunUntilKilled(client, use_ingest);
  json r = client.Tool("tmcra_reconcile", json::object());
  client.Close();
  std::set<int> all;
  for (int t = 1; t <= kTurns; ++t) all.insert(t);
  Verify(home, all, !use_ingest);
}

}  // namespace

TEST_CASE("kill matrix: SIGKILL at every step of a write loses and duplicates nothing",
          "[kill][integration]") {
  struct Point {
    const char* failpoint;
    bool use_ingest;
    const char* recovery_failpoint;  // a second crash, during the recovery's own delivery
  };
  const Point points[] = {
      {"prepare.after_recall_before_persist:2", false, nullptr},
      {"commit.after_insert_before_commit:2", false, nullptr},
      {"commit.after_commit_before_reply:2", false, nullptr},
      {"deliver.before_send:2", false, nullptr},
      {"deliver.after_accept_before_mark:2", false, nullptr},
      {"deliver.after_job_terminal_before_mark:2", false, nullptr},
      {"engine.job.after_claim:2", false, nullptr},
      {"engine.job.before_commit:2", false, nullptr},
      {"enqueue.after_insert_before_commit:2", true, nullptr},
      {"ingest.after_enqueue_before_deliver:2", true, nullptr},
      // Killed again while reconciling what the first crash left pending.
      {"commit.after_commit_before_reply:2", false, "deliver.after_accept_before_mark:1"},
      // The memory runs an accepted ingest's job on its own worker thread, which can finish
      // turn 2's job before the delivering thread reaches deliver.after_accept_before_mark;
      // the recovery would then have no job to die in. The job's own commit is armed too, so
      // the first crash (whichever of the two comes first) always leaves turn 2 accepted by
      // the memory, unmarked in the outbox and its job unfinished (checked below).
      {"deliver.after_accept_before_mark:2,engine.job.before_commit:2", false,
       "engine.job.before_commit:1"},
  };
  for (const auto& p : points) {
    const std::string name =
        std::string(p.failpoint) +
        (p.recovery_failpoint ? std::string(" then ") + p.recovery_failpoint : "");
    DYNAMIC_SECTION(name) {
      TempDir home;
      std::set<int> acknowledged;
      {
        Client client(home, p.failpoint);
        acknowledged = RunUntilKilled(client, p.use_ingest);
        CHECK(client.Killed());  // the failpoint was really reached
      }
      if (p.recovery_failpoint != nullptr) {
        const std::string recovery = p.recovery_failpoint;
        {
          // What the second crash is to interrupt is there: turn 2's write, still pending in
          // the outbox and, for a crash in the job, its job unfinished in the memory.
          auto memory =
              tmcra::db::Database::Open({.path = home.File("data/memory.db"), .read_only = true});
          auto outbox = tmcra::db::Database::Open(
              {.path = home.File("data/outbox.sqlite3"), .read_only = true});
          REQUIRE(memory);
          REQUIRE(outbox);
          CHECK(Count(**outbox, "SELECT COUNT(*) FROM ingest_queue WHERE state <> 'succeeded'") ==
                1);
          if (recovery.rfind("engine.job.", 0) == 0) {
            CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs WHERE status <> 'succeeded'") == 1);
          }
        }
        // The restarted process delivers the pending write at startup and dies doing it.
        CrashWhileReconciling(home, recovery);
      }
      Recover(home, acknowledged, p.use_ingest);
    }
  }
}

TEST_CASE("kill matrix, batch delivery: SIGKILL inside a batch loses and duplicates nothing",
          "[kill][integration][batch]") {
  // A backlog of pending items (as a crash or an outage leaves it) is delivered by the next
  // server at startup, in one batch; it dies at a failpoint inside that batch, and a third
  // server reconciles.
  constexpr int kItems = 6;
  for (const char* failpoint :
       {"deliver.before_send:3", "deliver.after_accept_before_mark:1",
        "deliver.after_accept_before_mark:4", "engine.job.before_commit:1"}) {
    DYNAMIC_SECTION(failpoint) {
      TempDir home;
      {
        auto outbox = tmcra::queue::Outbox::Open(home.File("data/outbox.sqlite3"));
        REQUIRE(outbox);
        for (int i = 0; i < kItems; ++i) {
          const std::string n = std::to_string(i);
          tmcra::queue::Item item;
          item.scope_name = "personal";
          item.session_id = "batch-session";
          item.messages = json::array({{{"message_id", "bu" + n},
                                        {"role", "user"},
                                        {"content", "user says batch" + n},
                                        {"timestamp", "2026-07-15T00:00:0" + n + "Z"}},
                                       {{"message_id", "ba" + n},
                                        {"role", "assistant"},
                                        {"content", "assistant says batch" + n},
                                        {"timestamp", "2026-07-15T00:00:0" + n + "Z"}}});
          item.consistency = "eventual";
          item.slow_policy = "auto";
          item.idempotency_key = "batch-kill-key-" + n;
          item.metadata = {{"integration", "mcp"}};
          REQUIRE((*outbox)->Enqueue(item));
        }
      }
      {
        Subprocess server({TMCRA_MCP_BIN}, {{"HOME", home.path()},
                                            {"TMCRA_DATA_DIR", home.File("data")},
                                            {"TMCRA_MEMORY_STATE_DIR", home.File("controls")},
                                            {"TMCRA_LOG_LEVEL", "warn"},
                                            {"TMCRA_FAILPOINTS", failpoint}});
        auto status = server.Wait(20s);  // no request needed: delivery starts with the process
        REQUIRE(status);
        CHECK((WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL));
        const std::string name = std::string(failpoint).substr(0, std::string(failpoint).find(':'));
        CHECK(server.Stderr().find("failpoint " + name + ": SIGKILL") != std::string::npos);
      }
      if (std::string(failpoint) == "deliver.after_accept_before_mark:1") {
        // Killed after the memory accepted the batch, before any item was marked: all of it
        // landed in one request, and reconcile must replay it, not write it again.
        auto memory = tmcra::db::Database::Open({home.File("data/memory.db")});
        REQUIRE(memory);
        CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs") == kItems);
      }
      {
        Client client(home, "");
        // Background delivery starts with the process and may finish some items before the
        // reconcile call lists what is left; either way every item must end succeeded.
        json r = client.Tool("tmcra_reconcile", json::object());
        CHECK(r["items"].size() <= static_cast<size_t>(kItems));
        for (const auto& item : r["items"]) CHECK(item["status"] == "succeeded");
        CHECK(r["queue_counts"]["succeeded"] == kItems);
        client.Close();
      }
      auto memory = tmcra::db::Database::Open({home.File("data/memory.db")});
      auto outbox = tmcra::db::Database::Open({home.File("data/outbox.sqlite3")});
      REQUIRE(memory);
      REQUIRE(outbox);
      CHECK(Text(**memory, "PRAGMA integrity_check") == "ok");
      CHECK(Text(**outbox, "PRAGMA integrity_check") == "ok");
      for (int i = 0; i < kItems; ++i) {
        for (const char* role : {"bu", "ba"}) {
          INFO(role << i);
          CHECK(Count(**memory, "SELECT COUNT(*) FROM records WHERE message_id = '" +
                                    std::string(role) + std::to_string(i) + "'") == 1);
        }
      }
      CHECK(Count(**outbox, "SELECT COUNT(*) FROM ingest_queue WHERE state <> 'succeeded'") == 0);
      CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs") == kItems);
      CHECK(Count(**memory, "SELECT COUNT(*) FROM jobs WHERE status <> 'succeeded'") == 0);
    }
  }
}
