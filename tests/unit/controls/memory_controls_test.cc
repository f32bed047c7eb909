// The local memory controls on real files in a temp dir: TMCRA's policy rules (modes,
// generations, no backfill, sub-agents, turn vetoes), tasks and continuation, the budget, the
// file format shared with TMCRA's JS plugins and Python client, permissions, and the lock
// protocol across processes (busy, stale-lock recovery, no lost update).
#include "src/controls/memory_controls.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::Errc;
using tmcra::Sha256Hex;
using tmcra::controls::ControlStore;
using tmcra::controls::IsContinuation;
using tmcra::controls::Policy;
using tmcra::testing::TempDir;

namespace {

const std::string kKey = Sha256Hex("key-one");
const std::string kOtherKey = Sha256Hex("key-two");

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Every file name in `dir` (to prove no temporary or stale file is left behind).
std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

void SetAge(const std::string& path, int seconds) {
  timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds;
  times[1] = times[0];
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

json Ok(tmcra::Result<json> r) {
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.has_value());
  return *r;
}

std::string ErrorText(const tmcra::Result<json>& r) {
  REQUIRE_FALSE(r.has_value());
  return r.error().message;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int WaitChild(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

TEST_CASE("memory controls: a missing state reads as TMCRA's defaults and reading writes nothing",
          "[controls]") {
  TempDir dir;
  const std::string root = dir.File("state");
  ControlStore store(root);
  auto policy = store.GetPolicy(kKey, "s1");
  REQUIRE(policy);
  CHECK(policy->ToJson() == json{{"key", kKey},
                                 {"sessionId", "s1"},
                                 {"mode", "normal"},
                                 {"generation", 0},
                                 {"turnHash", nullptr},
                                 {"parentTurnHash", nullptr},
                                 {"parentGeneration", nullptr},
                                 {"read", true},
                                 {"write", true}});
  CHECK(*store.BudgetChars(kKey) == 12000);
  const json dash = Ok(store.Control(kKey, "s1", "dashboard", json::object()));
  CHECK(dash == json{{"policy",
                      {{"sessionId", "s1"},
                       {"mode", "normal"},
                       {"generation", 0},
                       {"turnHash", nullptr},
                       {"parentTurnHash", nullptr},
                       {"parentGeneration", nullptr},
                       {"read", true},
                       {"write", true}}},
                     {"tasks", json::array()},
                     {"budgetChars", 12000},
                     {"recent", json::array()}});
  CHECK(*store.MayWrite(*policy));
  CHECK(Ok(store.Continuation(kKey, "s1", "继续")) ==
        json{{"query", "继续"}, {"task", nullptr}, {"candidates", json::array()}});
  CHECK_FALSE(Exists(root));  // nothing above writes
}

TEST_CASE(
    "memory controls: a mode switch bumps the generation and invalidates earlier captures, even "
    "back to normal",
    "[controls][modes]") {
  TempDir dir;
  ControlStore store(dir.path());
  const Policy before = *store.GetPolicy(kKey, "s1");
  CHECK(*store.MayWrite(before));

  CHECK(Ok(store.Control(kKey, "s1", "mode", {{"mode", "off"}})) ==
        json{{"mode", "off"}, {"generation", 1}, {"disabledContentBackfill", false}});
  CHECK_FALSE(*store.MayWrite(before));
  CHECK(Ok(store.Control(kKey, "s1", "mode", {{"mode", "normal"}}))["generation"] == 2);
  // No backfill: the capture taken before the switch stays invalid after switching back.
  CHECK_FALSE(*store.MayWrite(before));
  const Policy after = *store.GetPolicy(kKey, "s1");
  CHECK(after.generation == 2);
  CHECK(*store.MayWrite(after));
  // Setting the current mode again changes nothing.
  CHECK(Ok(store.Control(kKey, "s1", "mode", {{"mode", "normal"}}))["generation"] == 2);
  CHECK(*store.MayWrite(after));
  // Other sessions of the key are not affected.
  const Policy other = *store.GetPolicy(kKey, "s2");
  CHECK(other.generation == 0);
  CHECK(*store.MayWrite(other));
  // A capture taken in normal mode whose session is now recall_only cannot write either.
  REQUIRE(store.Control(kKey, "s2", "mode", {{"mode", "recall_only"}}));
  CHECK_FALSE(*store.MayWrite(other));
  CHECK(ErrorText(store.Control(kKey, "s1", "mode", {{"mode", "paused"}})) ==
        "Invalid memory mode");
  CHECK(ErrorText(store.Control(kKey, "s1", "mode", json::object())) == "Invalid memory mode");
  CHECK(ErrorText(store.Control(kKey, "s1", "mode", {{"mode", 1}})) == "Invalid memory mode");
}

TEST_CASE("memory controls: normal, recall_only and off: the read/write table",
          "[controls][modes]") {
  TempDir dir;
  ControlStore store(dir.path());
  struct Row {
    std::string mode;
    bool read;
    bool write;
  };
  for (const Row& row :
       {Row{"normal", true, true}, Row{"recall_only", true, false}, Row{"off", false, false}}) {
    INFO(row.mode);
    const std::string session = "session-" + row.mode;
    REQUIRE(store.Control(kKey, session, "mode", {{"mode", row.mode}}));
    const Policy p = *store.GetPolicy(kKey, session);
    CHECK(p.mode == row.mode);
    CHECK(p.read == row.read);
    CHECK(p.write == row.write);
    CHECK(*store.MayWrite(p) == row.write);
    // begin_turn records a turn only where writing is allowed.
    const Policy begun = *store.BeginTurn(kKey, session, "turn-" + row.mode);
    CHECK(begun.turn_hash.has_value() == row.write);
    // A capture claiming write in a read-only mode is refused by the current policy.
    Policy forged = p;
    forged.write = true;
    CHECK(*store.MayWrite(forged) == row.write);
  }
  // Leaving normal mode unbinds the session's task.
  REQUIRE(store.Control(kKey, "t", "task", {{"objective", "o"}}));
  REQUIRE(store.Control(kKey, "t", "mode", {{"mode", "recall_only"}}));
  const json file = json::parse(ReadFile(dir.File(kKey + ".json")));
  CHECK(file["sessions"][Sha256Hex("t")]["taskId"].is_null());
}

TEST_CASE("memory controls: sub-agent sessions are bound by their parent", "[controls][subagent]") {
  TempDir dir;
  ControlStore store(dir.path());
  const std::string child = "parent-1:subagent:worker";
  Policy p = *store.GetPolicy(kKey, child);
  CHECK(p.ToJson()["parentGeneration"] == 0);
  CHECK(p.ToJson()["parentTurnHash"].is_null());
  CHECK(p.read);
  CHECK(p.write);

  // The parent's turn is part of the child's capture, and vetoing it vetoes the child's capture.
  REQUIRE(store.BeginTurn(kKey, "parent-1", "parent-turn"));
  const Policy capture = *store.BeginTurn(kKey, child, "child-turn");
  CHECK(capture.parent_turn_hash == Sha256Hex("parent-turn"));
  CHECK(capture.turn_hash == Sha256Hex("child-turn"));
  CHECK(*store.MayWrite(capture));
  REQUIRE(store.SuppressTurn(kKey, "parent-1"));
  CHECK_FALSE(*store.MayWrite(capture));

  // Parent recall_only: the child may read, not write; parent off: neither.
  const std::string child2 = "parent-2:subagent:a:subagent:b";  // the part before the first marker
  const Policy before = *store.GetPolicy(kKey, child2);
  REQUIRE(store.Control(kKey, "parent-2", "mode", {{"mode", "recall_only"}}));
  p = *store.GetPolicy(kKey, child2);
  CHECK(p.read);
  CHECK_FALSE(p.write);
  CHECK(p.parent_generation == 1);
  CHECK(p.generation == 0);
  CHECK_FALSE(*store.MayWrite(before));
  REQUIRE(store.Control(kKey, "parent-2", "mode", {{"mode", "off"}}));
  p = *store.GetPolicy(kKey, child2);
  CHECK_FALSE(p.read);
  CHECK_FALSE(p.write);
  // Back to normal: the parent generation moved, so the old capture stays invalid.
  REQUIRE(store.Control(kKey, "parent-2", "mode", {{"mode", "normal"}}));
  p = *store.GetPolicy(kKey, child2);
  CHECK(p.write);
  CHECK_FALSE(*store.MayWrite(before));
  CHECK(*store.MayWrite(p));
  // The child's own mode counts too.
  REQUIRE(store.Control(kKey, child2, "mode", {{"mode", "off"}}));
  CHECK_FALSE(store.GetPolicy(kKey, child2)->read);
  CHECK(store.GetPolicy(kKey, "parent-2")->read);

  // A sub-agent id with a blank parent is not an exact session id.
  auto bad = store.GetPolicy(kKey, " :subagent:x");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "Exact session_id is required");
}

TEST_CASE("memory controls: a correction vetoes its own turn, not older or later ones",
          "[controls][correction]") {
  // TMCRA's test_correction_turn_veto_does_not_drop_unrelated_older_turn.
  TempDir dir;
  ControlStore store(dir.path());
  const Policy first = *store.BeginTurn(kKey, "s", "first");
  const Policy correction = *store.BeginTurn(kKey, "s", "correction");
  CHECK(Ok(store.Control(kKey, "s", "correction_start", nullptr)) ==
        json{{"automaticCapture", "suppressed"},
             {"turnIdentified", true},
             {"originalMemoryChanged", false}});
  CHECK(*store.MayWrite(first));
  CHECK_FALSE(*store.MayWrite(correction));
  const Policy after = *store.BeginTurn(kKey, "s", "after");
  CHECK(*store.MayWrite(after));
  CHECK_FALSE(*store.MayWrite(correction));
  // Preparing the corrected turn again does not lift its veto.
  const Policy again = *store.BeginTurn(kKey, "s", "correction");
  CHECK_FALSE(*store.MayWrite(again));
  const json file = json::parse(ReadFile(dir.File(kKey + ".json")));
  CHECK(file["sessions"][Sha256Hex("s")]["suppressedTurns"] ==
        json{{Sha256Hex("correction"), true}});
  // Without a current turn the correction is unidentified.
  CHECK(Ok(store.Control(kKey, "fresh", "correction_start", json::object()))["turnIdentified"] ==
        false);
}

TEST_CASE(
    "memory controls: turn-less suppression ends with a new turn or a mode switch (deviation from "
    "contract 9.4 item 21)",
    "[controls][correction]") {
  TempDir dir;
  ControlStore store(dir.path());
  // A session that never prepares turns: its captures have no turn hash.
  const Policy legacy = *store.GetPolicy(kKey, "s");
  CHECK_FALSE(legacy.turn_hash.has_value());
  REQUIRE(store.SuppressTurn(kKey, "s"));
  CHECK_FALSE(*store.MayWrite(legacy));
  CHECK_FALSE(*store.MayWrite(*store.GetPolicy(kKey, "s")));  // TMCRA keeps this forever
  const std::string path = dir.File(kKey + ".json");
  CHECK(json::parse(ReadFile(path))["sessions"][Sha256Hex("s")]["suppressLegacyCapture"] == true);

  SECTION("a new turn ends it; the corrected turn stays vetoed") {
    const Policy during = *store.BeginTurn(kKey, "s", "t1");
    REQUIRE(store.SuppressTurn(kKey, "s"));  // correction of t1
    CHECK_FALSE(*store.MayWrite(during));
    // The same turn prepared again is still the correction: nothing is lifted.
    CHECK_FALSE(*store.MayWrite(*store.BeginTurn(kKey, "s", "t1")));
    CHECK_FALSE(*store.MayWrite(legacy));
    const Policy next = *store.BeginTurn(kKey, "s", "t2");
    CHECK(*store.MayWrite(next));
    CHECK(*store.MayWrite(legacy));
    CHECK_FALSE(*store.MayWrite(during));
    const json row = json::parse(ReadFile(path))["sessions"][Sha256Hex("s")];
    CHECK_FALSE(row.contains("suppressLegacyCapture"));
    CHECK(row["suppressedTurns"][Sha256Hex("t1")] == true);
  }
  SECTION("a mode switch ends it without reviving anything captured before") {
    REQUIRE(store.Control(kKey, "s", "mode", {{"mode", "recall_only"}}));
    REQUIRE(store.Control(kKey, "s", "mode", {{"mode", "normal"}}));
    CHECK_FALSE(*store.MayWrite(legacy));                 // older generation
    CHECK(*store.MayWrite(*store.GetPolicy(kKey, "s")));  // new activity is captured
  }
  SECTION("setting the same mode again does not end it") {
    REQUIRE(store.Control(kKey, "s", "mode", {{"mode", "normal"}}));
    CHECK_FALSE(*store.MayWrite(*store.GetPolicy(kKey, "s")));
  }
}

TEST_CASE("memory controls: tasks: create, update, complete", "[controls][tasks]") {
  TempDir dir;
  ControlStore store(dir.path());
  const json created =
      Ok(store.Control(kKey, "s1", "task",
                       {{"objective", "  Ship the 发布 feature \n"}, {"nextStep", "write tests"}}));
  const std::string id = created["id"];
  CHECK(id.rfind("task_", 0) == 0);
  CHECK(id.size() == 5 + 36);
  CHECK(created["objective"] == "Ship the 发布 feature");
  CHECK(created["nextStep"] == "write tests");
  CHECK_FALSE(created.contains("summary"));
  CHECK(created["status"] == "active");
  const std::string updated_at = created["updatedAt"];
  CHECK(updated_at.size() >= 25);
  CHECK(updated_at.substr(updated_at.size() - 6) == "+00:00");
  json file = json::parse(ReadFile(dir.File(kKey + ".json")));
  CHECK(file["sessions"][Sha256Hex("s1")]["taskId"] == id);

  // Update by id: fields given replace, others stay; values become trimmed text.
  const json updated = Ok(store.Control(kKey, "s2", "task", {{"id", id}, {"summary", 42}}));
  CHECK(updated["objective"] == "Ship the 发布 feature");
  CHECK(updated["summary"] == "42");
  CHECK(updated["nextStep"] == "write tests");
  CHECK(Ok(store.Control(kKey, "s2", "task",
                         {{"id", id}, {"summary", json::array({"a", true})}}))["summary"] ==
        "['a', True]");
  // Deviation: a null field is "not given" (TMCRA's Python would store "None").
  CHECK(Ok(store.Control(kKey, "s2", "task", {{"id", id}, {"summary", nullptr}}))["summary"] ==
        "['a', True]");

  // Fields are cut at 4000 code points, not bytes.
  const json long_task =
      Ok(store.Control(kKey, "s1", "task", {{"objective", std::string(2000, 'x') + [] {
                                               std::string s;
                                               for (int i = 0; i < 3000; ++i) s += "界";
                                               return s;
                                             }()}}));
  const std::string objective = long_task["objective"];
  CHECK(objective.size() == 2000 + 2000 * 3);

  // Complete: the session is no longer bound to it; status resets to active when omitted.
  const json done = Ok(store.Control(kKey, "s1", "task", {{"id", id}, {"status", "completed"}}));
  CHECK(done["status"] == "completed");
  file = json::parse(ReadFile(dir.File(kKey + ".json")));
  CHECK(file["sessions"][Sha256Hex("s1")]["taskId"].is_null());
  CHECK(file["tasks"][id]["status"] == "completed");
  CHECK(Ok(store.Control(kKey, "s1", "task", {{"id", id}}))["status"] == "active");
  CHECK(Ok(store.Control(kKey, "s1", "task", {{"id", id}, {"status", "blocked"}}))["status"] ==
        "blocked");

  // Errors, and none of them writes.
  const std::string before = ReadFile(dir.File(kKey + ".json"));
  CHECK(ErrorText(store.Control(kKey, "s1", "task", {{"id", "task_missing"}})) ==
        "Unknown task in this scope");
  CHECK(ErrorText(store.Control(kKey, "s1", "task", {{"id", 7}})) == "Unknown task in this scope");
  CHECK(ErrorText(store.Control(kKey, "s1", "task", json::object())) ==
        "Task objective and valid status required");
  CHECK(ErrorText(store.Control(kKey, "s1", "task", {{"objective", "   "}})) ==
        "Task objective and valid status required");
  CHECK(ErrorText(store.Control(kKey, "s1", "task", {{"objective", "o"}, {"status", "done"}})) ==
        "Task objective and valid status required");
  CHECK(ErrorText(store.Control(kKey, "s1", "task", {{"objective", "o"}, {"status", ""}})) ==
        "Task objective and valid status required");
  CHECK(ReadFile(dir.File(kKey + ".json")) == before);
  REQUIRE(store.Control(kKey, "quiet", "mode", {{"mode", "recall_only"}}));
  const std::string before_quiet = ReadFile(dir.File(kKey + ".json"));
  CHECK(ErrorText(store.Control(kKey, "quiet", "task", {{"objective", "o"}})) ==
        "Task capture is disabled");
  CHECK(ReadFile(dir.File(kKey + ".json")) == before_quiet);

  // Tasks are per key (scope), shared by the key's sessions.
  const json dash = Ok(store.Control(kKey, "s3", "dashboard", json::object()));
  CHECK(dash["tasks"].size() == 2);
  CHECK(Ok(store.Control(kOtherKey, "s3", "dashboard", json::object()))["tasks"].empty());
}

TEST_CASE("memory controls: continuation phrases, English and Chinese",
          "[controls][continuation]") {
  for (const char* yes : {"继续",
                          "好的，继续",
                          "好，继续。",
                          "好 继续",
                          "好的,,，  继续!!",
                          "接着",
                          "接着做",
                          "接着来",
                          "往下",
                          "往下做",
                          "往下走！",
                          "补齐这些",
                          "完成这些",
                          "Continue",
                          "CONTINUE.",
                          "go on!",
                          "Go On",
                          "carry on",
                          "Carry On。",
                          "resume",
                          "RESUME!!",
                          "  continue  ",
                          "好的，\u3000继续",
                          "continue\u3000!",
                          "continue\n\n",
                          "好\u00a0继续",
                          "re\u017fume",
                          "cont\u0130nue"}) {
    INFO(yes);
    CHECK(IsContinuation(yes));
  }
  for (const char* no : {"continue the work", "please continue", "继续吧", "好的", "", "gone",
                         "GO  ON", "的继续", "continuer", "接着做做", "ｃｏｎｔｉｎｕｅ",
                         "carry\u00a0on", "继续\u200b", "resumé", "继 续", "continue?"}) {
    INFO(no);
    CHECK_FALSE(IsContinuation(no));
  }
  // Long inputs are matched in linear time and bounded stack (no regex recursion).
  CHECK(IsContinuation("continue" + std::string(200000, '!')));
  CHECK_FALSE(IsContinuation(std::string(200000, 'x')));
}

TEST_CASE(
    "memory controls: continuation picks the session's task, the single task, or offers candidates",
    "[controls][continuation]") {
  // TMCRA's test_task_ambiguity_scope_isolation_and_budget, the task half.
  TempDir dir;
  ControlStore store(dir.path());
  const json first = Ok(store.Control(kKey, "author", "task",
                                      {{"objective", "Migrate the billing DB"},
                                       {"summary", "schema copied"},
                                       {"nextStep", "backfill rows"}}));
  json single = Ok(store.Continuation(kKey, "another-session", "继续"));
  CHECK(single["task"]["id"] == first["id"]);
  CHECK(single["query"] ==
        "继续\nCurrent task: Migrate the billing DB\nLast observed result: schema "
        "copied\nNext step: backfill rows");
  CHECK(single["candidates"].empty());

  const json second =
      Ok(store.Control(kKey, "author2", "task", {{"objective", "Write the release notes"}}));
  json ambiguous = Ok(store.Continuation(kKey, "another-session", "continue"));
  CHECK(ambiguous["task"].is_null());
  CHECK(ambiguous["query"] == "continue");
  CHECK(ambiguous["candidates"] ==
        json::array({{{"id", first["id"]}, {"objective", "Migrate the billing DB"}},
                     {{"id", second["id"]}, {"objective", "Write the release notes"}}}));
  // The session's own task wins; empty summary and next step read as "".
  json own = Ok(store.Continuation(kKey, "author2", "  go on  "));
  CHECK(own["task"]["id"] == second["id"]);
  CHECK(own["query"] ==
        "  go on  \nCurrent task: Write the release notes\nLast observed result: \nNext step: ");
  // Another key (scope) has no candidates.
  CHECK(Ok(store.Continuation(kOtherKey, "author2", "继续"))["candidates"].empty());
  // A completed task is not continued.
  REQUIRE(store.Control(kKey, "author2", "task", {{"id", second["id"]}, {"status", "completed"}}));
  CHECK(Ok(store.Continuation(kKey, "author2", "继续"))["task"]["id"] == first["id"]);
  // Not a continuation: the prompt is the query, whatever the session id.
  CHECK(Ok(store.Continuation(kKey, "   ", "what is the DB?")) ==
        json{{"query", "what is the DB?"}, {"task", nullptr}, {"candidates", json::array()}});
  CHECK(store.Continuation(kKey, "   ", "继续").error().message == "Exact session_id is required");
}

TEST_CASE("memory controls: ForRecall is GetPolicy, Continuation and BudgetChars in one read",
          "[controls][continuation]") {
  TempDir dir;
  ControlStore store(dir.path());
  const auto same = [&](const std::string& session, const std::string& prompt) {
    INFO(session << " / " << prompt);
    auto together = store.ForRecall(kKey, session, prompt);
    auto policy = store.GetPolicy(kKey, session);
    REQUIRE(together.has_value() == policy.has_value());
    if (!together) {
      CHECK(together.error().message == policy.error().message);
      return;
    }
    CHECK(together->policy.ToJson() == policy->ToJson());
    if (!policy->read) {
      CHECK(together->handoff.is_null());  // nothing more is looked at
      return;
    }
    CHECK(together->handoff == Ok(store.Continuation(kKey, session, prompt)));
    CHECK(together->budget_chars == *store.BudgetChars(kKey));
  };
  same("s", "what is the DB?");  // no state file yet
  same("s", "continue");
  REQUIRE(store.Control(kKey, "author", "task", {{"objective", "Migrate the billing DB"}}));
  REQUIRE(store.Control(kKey, "s", "budget", {{"budgetChars", 3000}}));
  same("s", "继续");
  same("author", "continue");
  same("s", "what is the DB?");
  REQUIRE(store.Control(kKey, "quiet", "mode", {{"mode", "off"}}));
  same("quiet", "continue");
  same("quiet:subagent:1", "continue");
  REQUIRE(store.Control(kKey, "ro", "mode", {{"mode", "recall_only"}}));
  same("ro", "continue");
  same("   ", "continue");  // a blank session id is refused, as GetPolicy refuses it
}

TEST_CASE("memory controls: BeginTurnForRecall is BeginTurn, then ForRecall of the state it left",
          "[controls][continuation]") {
  TempDir dir;
  TempDir twin_dir;  // a copy of the state before each step, for BeginTurn then ForRecall
  ControlStore store(dir.path());
  ControlStore twin(twin_dir.path());
  const auto state_text = [&](const std::string& root) {
    std::ifstream in(root + "/" + kKey + ".json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto same = [&](const std::string& session, const std::string& turn,
                        const std::string& prompt) {
    INFO(session << " / " << turn << " / " << prompt);
    std::filesystem::remove_all(twin_dir.path());
    std::filesystem::copy(dir.path(), twin_dir.path(), std::filesystem::copy_options::recursive);
    auto together = store.BeginTurnForRecall(kKey, session, turn, prompt);
    auto begun = twin.BeginTurn(kKey, session, turn);
    REQUIRE(together.has_value() == begun.has_value());
    if (!together) {
      CHECK(together.error().message == begun.error().message);
      return;
    }
    CHECK(together->policy.ToJson() == begun->ToJson());
    auto after = twin.ForRecall(kKey, session, prompt);
    REQUIRE(after);
    CHECK(together->handoff == after->handoff);
    CHECK(together->budget_chars == after->budget_chars);
    CHECK(state_text(dir.path()) == state_text(twin_dir.path()));  // the same turn recorded
  };
  same("s", "t1", "what is the DB?");  // no state file yet
  same("s", "t1", "continue");         // a replayed prepare
  REQUIRE(store.Control(kKey, "author", "task", {{"objective", "Migrate the billing DB"}}));
  REQUIRE(store.Control(kKey, "s", "budget", {{"budgetChars", 3000}}));
  same("s", "t2", "继续");
  auto continued = store.ForRecall(kKey, "s", "继续");
  REQUIRE(continued);
  CHECK_FALSE(continued->handoff["task"].is_null());  // the hand-off above had a task
  same("author", "a1", "continue");
  same("s", "t3", "what is the DB?");
  REQUIRE(store.Control(kKey, "s", "correction_start", nullptr));
  same("s", "t4", "continue");  // a new turn ends the correction of turn-less capture
  REQUIRE(store.Control(kKey, "ro", "mode", {{"mode", "recall_only"}}));
  same("ro", "r1", "continue");  // writing off: nothing recorded, recall still served
  REQUIRE(store.Control(kKey, "quiet", "mode", {{"mode", "off"}}));
  same("quiet", "q1", "continue");
  same("quiet:subagent:1", "q2", "continue");
  same("   ", "t5", "continue");  // a blank session id
  same("s", "   ", "continue");   // a blank turn id
}

TEST_CASE("memory controls: budget: an int in 1000..64000, bool and float rejected",
          "[controls][budget]") {
  TempDir dir;
  ControlStore store(dir.path());
  CHECK(Ok(store.Control(kKey, "s", "budget", {{"budgetChars", 1000}})) ==
        json{{"budgetChars", 1000}});
  CHECK(*store.BudgetChars(kKey) == 1000);
  CHECK(Ok(store.Control(kKey, "s", "budget", {{"budgetChars", 64000}})) ==
        json{{"budgetChars", 64000}});
  for (const json& bad : {json(999), json(64001), json(-5), json(true), json(false), json(2000.0),
                          json("2000"), json(nullptr), json(1e30)}) {
    INFO(bad.dump());
    CHECK(ErrorText(store.Control(kKey, "s", "budget", {{"budgetChars", bad}})) ==
          "budgetChars must be 1000..64000");
  }
  CHECK(ErrorText(store.Control(kKey, "s", "budget", json::object())) ==
        "budgetChars must be 1000..64000");
  CHECK(*store.BudgetChars(kKey) == 64000);
  CHECK(*store.BudgetChars(kOtherKey) == 12000);  // per key
  CHECK(Ok(store.Control(kKey, "t", "dashboard", json::object()))["budgetChars"] == 64000);
}

TEST_CASE("memory controls: errors are values with TMCRA's messages", "[controls][errors]") {
  TempDir dir;
  ControlStore store(dir.path());
  for (const std::string& key :
       {std::string("short"), std::string(64, 'A'), kKey + "0", std::string(64, 'g')}) {
    auto r = store.GetPolicy(key, "s");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::kInvalidArgument);
    CHECK(r.error().message == "Invalid memory control key");
    CHECK(store.Control(key, "s", "mode", {{"mode", "off"}}).error().message ==
          "Invalid memory control key");
  }
  CHECK(store.GetPolicy(kKey, " \t\n").error().message == "Exact session_id is required");
  CHECK(store.GetPolicy(kKey, "\u3000").error().message == "Exact session_id is required");
  CHECK(store.Control(kKey, "", "budget", {{"budgetChars", 2000}}).error().message ==
        "Exact session_id is required");
  CHECK(store.BeginTurn(kKey, "s", "  ").error().message == "An exact host turn ID is required");
  CHECK(store.BeginTurn(kKey, "  ", "t").error().message == "Exact session_id is required");
  CHECK(store.SuppressTurn(kKey, "").error().message == "Exact session_id is required");
  CHECK(store.Control(kKey, "s", "reset", json::object()).error().message ==
        "Unknown memory control action");
  CHECK(store.Control(kKey, "s", "mode", json::array()).error().code == Errc::kInvalidArgument);
  CHECK_FALSE(Exists(dir.File(kKey + ".json")));  // no failed call wrote

  const std::string path = dir.File(kKey + ".json");
  WriteFile(path, R"({"schemaVersion": 2, "sessions": {}})");
  auto v2 = store.GetPolicy(kKey, "s");
  REQUIRE_FALSE(v2);
  CHECK(v2.error().code == Errc::kDataLoss);
  CHECK(v2.error().message == "Unsupported memory controls version");
  CHECK(store.Control(kKey, "s", "mode", {{"mode", "off"}}).error().message ==
        "Unsupported memory controls version");
  CHECK(ReadFile(path) == R"({"schemaVersion": 2, "sessions": {}})");  // never overwritten
  WriteFile(path, R"({"schemaVersion": true})");
  CHECK(store.GetPolicy(kKey, "s").error().code == Errc::kDataLoss);
  WriteFile(path, "{\"schemaVersion\": 1, ");
  CHECK(store.GetPolicy(kKey, "s").error().code == Errc::kDataLoss);
  CHECK(store.BudgetChars(kKey).error().code == Errc::kDataLoss);
  WriteFile(path, "[1]");
  CHECK(store.GetPolicy(kKey, "s").error().code == Errc::kDataLoss);
  WriteFile(path, R"({"schemaVersion": 1, "sessions": []})");
  CHECK(store.GetPolicy(kKey, "s").error().code == Errc::kDataLoss);
  WriteFile(path,
            R"({"schemaVersion": 1, "sessions": {")" + Sha256Hex("s") + R"(": {"mode": 3}}})");
  CHECK(store.GetPolicy(kKey, "s").error().code == Errc::kDataLoss);
  CHECK(store.GetPolicy(kKey, "t"));  // other rows are fine
  // A hand-written minimal file: missing containers read as empty.
  WriteFile(path, R"({"schemaVersion": 1.0})");
  CHECK(store.GetPolicy(kKey, "s"));
  CHECK(*store.BudgetChars(kKey) == 12000);
  CHECK(store.Control(kKey, "s", "budget", {{"budgetChars", 3000}}));

  // A root that is a file.
  WriteFile(dir.File("plain"), "x");
  ControlStore broken(dir.File("plain"));
  CHECK_FALSE(broken.Control(kKey, "s", "mode", {{"mode", "off"}}));
}

TEST_CASE(
    "memory controls: a state written by TMCRA is read, and written back byte for byte as Python "
    "writes it",
    "[controls][format]") {
  TempDir dir;
  ControlStore store(dir.path());
  const std::string s1 = Sha256Hex("s1");
  const std::string s2 = Sha256Hex("s2");
  // json.dumps(state, ensure_ascii=False) of a state TMCRA's clients wrote (members in their
  // order, unknown ones kept, JS's `recent`, floats, escapes, non-ASCII text).
  const std::string tmcra =
      R"({"schemaVersion": 1, "sessions": {")" + s1 +
      R"(": {"mode": "normal", "generation": 3, "taskId": "task_1", "currentTurnHash": ")" +
      Sha256Hex("t1") + R"(", "changedAt": "2026-01-02T03:04:05.000Z"}, ")" + s2 +
      R"(": {"mode": "recall_only", "generation": 1, "taskId": null, "suppressedTurns": {")" +
      Sha256Hex("t0") +
      R"(": true}, "suppressLegacyCapture": true}}, "tasks": {"task_1": {"id": "task_1", "objective": "发布 \"v2\" \\ path\n\tnext\u0001 🚀", "summary": "", "nextStep": "写测试", "status": "active", "updatedAt": "2026-01-02T03:04:05.000Z"}}, "recent": [{"kind": "write", "jobId": "job_1", "sessionKey": ")" +
      s1 + R"(", "at": "2026-01-02T03:04:05.000Z"}, {"kind": "recall", "sessionKey": ")" + s2 +
      R"(", "at": "x"}], "budgetChars": 15000, "extra": {"ratio": 1.5, "big": 1e+300, "neg": -0.0, "list": [1, 2.25, null, true]}})";
  const std::string path = dir.File(kKey + ".json");
  WriteFile(path, tmcra);

  const Policy p1 = *store.GetPolicy(kKey, "s1");
  CHECK(p1.generation == 3);
  CHECK(p1.turn_hash == Sha256Hex("t1"));
  const Policy p2 = *store.GetPolicy(kKey, "s2");
  CHECK(p2.mode == "recall_only");
  CHECK_FALSE(p2.write);
  CHECK(*store.BudgetChars(kKey) == 15000);
  const json dash = Ok(store.Control(kKey, "s1", "dashboard", json::object()));
  CHECK(dash["recent"] == json::parse(R"([{"kind": "write", "jobId": "job_1", "sessionKey": ")" +
                                      s1 + R"(", "at": "2026-01-02T03:04:05.000Z"}])"));
  CHECK(dash["tasks"][0]["objective"] == "发布 \"v2\" \\ path\n\tnext\u0001 🚀");
  CHECK(Ok(store.Continuation(kKey, "s1", "接着做"))["task"]["id"] == "task_1");

  // Python's client, given this file, writes exactly this after control(budget=20000)
  // (checked against TMCRA's controls.py).
  REQUIRE(store.Control(kKey, "s1", "budget", {{"budgetChars", 20000}}));
  std::string expected = tmcra;
  expected.replace(expected.find("\"budgetChars\": 15000"), 20, "\"budgetChars\": 20000");
  CHECK(ReadFile(path) == expected);

  // A compact file as the JS plugins write it (JSON.stringify) is read too, and new rows and
  // members are appended in the order Python would add them.
  WriteFile(path,
            R"({"schemaVersion":1,"sessions":{},"tasks":{},"recent":[],"budgetChars":12000})");
  REQUIRE(store.Control(kKey, "s1", "mode", {{"mode", "off"}}));
  CHECK(
      ReadFile(path) ==
      R"({"schemaVersion": 1, "sessions": {")" + s1 +
          R"(": {"mode": "off", "generation": 1, "taskId": null}}, "tasks": {}, "recent": [], "budgetChars": 12000})");
  REQUIRE(store.BeginTurn(kKey, "s2", "x"));
  REQUIRE(store.SuppressTurn(kKey, "s2"));
  CHECK(
      ReadFile(path) ==
      R"({"schemaVersion": 1, "sessions": {")" + s1 +
          R"(": {"mode": "off", "generation": 1, "taskId": null}, ")" + s2 +
          R"(": {"mode": "normal", "generation": 0, "taskId": null, "currentTurnHash": ")" +
          Sha256Hex("x") + R"(", "suppressedTurns": {")" + Sha256Hex("x") +
          R"(": true}, "suppressLegacyCapture": true}}, "tasks": {}, "recent": [], "budgetChars": 12000})");
}

TEST_CASE(
    "memory controls: the state directory is 0700 and every file 0600, with nothing left behind",
    "[controls][permissions]") {
  TempDir dir;
  const std::string root = dir.File("a/b/memory-controls");
  const mode_t old_mask = umask(0);  // prove the modes do not depend on the umask
  ControlStore store(root);
  auto r = store.Control(kKey, "s", "mode", {{"mode", "off"}});
  umask(old_mask);
  REQUIRE(r);
  CHECK(Mode(dir.File("a")) == 0700);
  CHECK(Mode(dir.File("a/b")) == 0700);
  CHECK(Mode(root) == 0700);
  CHECK(Mode(root + "/" + kKey + ".json") == 0600);
  CHECK(Listing(root) == std::set<std::string>{kKey + ".json"});
  // An existing directory is left as it is.
  REQUIRE(chmod(root.c_str(), 0755) == 0);
  REQUIRE(store.Control(kKey, "s", "mode", {{"mode", "normal"}}));
  CHECK(Mode(root) == 0755);
  CHECK(Mode(root + "/" + kKey + ".json") == 0600);
}

TEST_CASE("memory controls: Policy JSON round-trips, and reads TMCRA's captures",
          "[controls][policy]") {
  Policy p;
  p.key = kKey;
  p.session_id = "a:subagent:b";
  p.generation = 4;
  p.turn_hash = "t";
  p.parent_generation = 2;
  p.write = false;
  const json j = p.ToJson();
  CHECK(j == json{{"key", kKey},
                  {"sessionId", "a:subagent:b"},
                  {"mode", "normal"},
                  {"generation", 4},
                  {"turnHash", "t"},
                  {"parentTurnHash", nullptr},
                  {"parentGeneration", 2},
                  {"read", true},
                  {"write", false}});
  auto back = Policy::FromJson(j);
  REQUIRE(back);
  CHECK(back->ToJson() == j);
  // Python's capture of a plain session: parentGeneration null.
  auto py = Policy::FromJson(json::parse(R"({"key": ")" + kKey +
                                         R"(", "sessionId": "s", "mode": "normal", "generation": 0,
      "turnHash": null, "parentTurnHash": null, "parentGeneration": null, "read": true, "write": true})"));
  REQUIRE(py);
  CHECK(py->parent_generation == 0);
  CHECK_FALSE(py->turn_hash);
  TempDir dir;
  ControlStore store(dir.path());
  CHECK(*store.MayWrite(*py));
  // A sub-agent capture without a parent generation never matches (Python compares with None).
  auto orphan = Policy::FromJson(
      {{"key", kKey}, {"sessionId", "a:subagent:b"}, {"generation", 0}, {"write", true}});
  REQUIRE(orphan);
  CHECK_FALSE(*store.MayWrite(*orphan));
  // Errors name the field.
  CHECK(Policy::FromJson(json::array()).error().message == "capture: must be an object");
  CHECK(Policy::FromJson({{"sessionId", "s"}, {"generation", 0}}).error().message ==
        "capture.key: must be a string");
  CHECK(Policy::FromJson({{"key", kKey}, {"generation", 0}}).error().message ==
        "capture.sessionId: must be a string");
  CHECK(
      Policy::FromJson({{"key", kKey}, {"sessionId", "s"}, {"generation", true}}).error().message ==
      "capture.generation: must be an integer");
  CHECK(Policy::FromJson({{"key", kKey}, {"sessionId", "s"}, {"generation", 0}, {"turnHash", 5}})
            .error()
            .message == "capture.turnHash: must be a string or null");
  CHECK(Policy::FromJson(
            {{"key", kKey}, {"sessionId", "s"}, {"generation", 0}, {"parentGeneration", "1"}})
            .error()
            .message == "capture.parentGeneration: must be an integer or null");
  // A capture that cannot write is refused without reading anything (even with a bad key).
  Policy closed;
  closed.key = "bad";
  closed.write = false;
  CHECK(*store.MayWrite(closed) == false);
  Policy bad_key;
  bad_key.key = "bad";
  CHECK(store.MayWrite(bad_key).error().message == "Invalid memory control key");
}

TEST_CASE("memory controls: ControlKey and DefaultRoot follow TMCRA", "[controls]") {
  // sha256("https://memory.example\0secret\0personal"), from TMCRA's control_key.
  const std::string expected = "bcd34a44fe266c58c7f793d23948909282ec616c59784b58a359c210a9fb5cb0";
  CHECK(tmcra::controls::ControlKey("https://memory.example", "secret", "personal") == expected);
  CHECK(tmcra::controls::ControlKey("https://memory.example//", "secret", "personal") == expected);
  CHECK(tmcra::controls::ControlKey("https://memory.example", "secret", "work") != expected);

  std::map<std::string, std::string> env{{"HOME", "/home/u"}};
  const auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  CHECK(ControlStore::DefaultRoot(lookup) == "/home/u/.config/tmcra/memory-controls");
  env["PLUGIN_DATA"] = "~/plugin";
  CHECK(ControlStore::DefaultRoot(lookup) == "/home/u/plugin/memory-controls");
  env["TMCRA_MEMORY_STATE_DIR"] = "/var/state";
  CHECK(ControlStore::DefaultRoot(lookup) == "/var/state");
}

TEST_CASE("memory controls: the lock is respected across processes", "[controls][lock]") {
  TempDir dir;
  ControlStore store(dir.path());
  REQUIRE(store.Control(kKey, "s", "budget", {{"budgetChars", 2000}}));
  const std::string lock = dir.File(kKey + ".lock");

  SECTION("a writer waits for a holder that releases within the retry window") {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // A TMCRA-style holder (JS/Python): an empty O_EXCL file, no flock.
      const int fd = open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
      (void)!write(ready[1], "x", 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      unlink(lock.c_str());
      _exit(fd >= 0 ? 0 : 1);
    }
    char c = 0;
    REQUIRE(read(ready[0], &c, 1) == 1);
    const auto start = std::chrono::steady_clock::now();
    auto r = store.Control(kKey, "s", "budget", {{"budgetChars", 3000}});
    const double waited = SecondsSince(start);
    CHECK(WaitChild(child) == 0);
    REQUIRE(r);
    CHECK(waited > 0.3);
    CHECK(*store.BudgetChars(kKey) == 3000);
    close(ready[0]);
    close(ready[1]);
  }

  SECTION("a live holder past the retry window makes writes busy; reads go on; then it frees") {
    int ready[2];
    int release[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(release) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Holds the lock as a tmcra-mcp holder does (flock + pid), and backdates it: a live
      // holder is never broken, however old its lock.
      const int fd = open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
      flock(fd, LOCK_EX);
      const std::string content =
          "{\"pid\": " + std::to_string(getpid()) + ", \"host\": \"" + HostName() + "\"}\n";
      (void)!write(fd, content.data(), content.size());
      SetAge(lock, 60);
      (void)!write(ready[1], "x", 1);
      char go = 0;
      (void)!read(release[0], &go, 1);
      unlink(lock.c_str());
      _exit(0);
    }
    char c = 0;
    REQUIRE(read(ready[0], &c, 1) == 1);
    const auto start = std::chrono::steady_clock::now();
    auto busy = store.Control(kKey, "s", "budget", {{"budgetChars", 4000}});
    const double waited = SecondsSince(start);
    REQUIRE_FALSE(busy);
    CHECK(busy.error().code == Errc::kUnavailable);
    CHECK(busy.error().retryable);
    CHECK(busy.error().message == "Memory controls busy; inspect the local lock");
    CHECK(waited > 1.2);
    CHECK(Exists(lock));
    CHECK(*store.BudgetChars(kKey) == 2000);  // reads need no lock
    CHECK(store.GetPolicy(kKey, "s"));
    REQUIRE(write(release[1], "x", 1) == 1);
    CHECK(WaitChild(child) == 0);
    REQUIRE(store.Control(kKey, "s", "budget", {{"budgetChars", 4000}}));
    CHECK(*store.BudgetChars(kKey) == 4000);
    for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
  }
}

TEST_CASE("memory controls: stale locks are recovered, fresh ones respected", "[controls][lock]") {
  TempDir dir;
  ControlStore store(dir.path());
  REQUIRE(store.Control(kKey, "s", "budget", {{"budgetChars", 2000}}));
  const std::string lock = dir.File(kKey + ".lock");
  const auto timed_write = [&](int64_t budget, double* seconds) {
    const auto start = std::chrono::steady_clock::now();
    auto r = store.Control(kKey, "s", "budget", {{"budgetChars", budget}});
    *seconds = SecondsSince(start);
    return r;
  };
  double seconds = 0;

  SECTION("the holder's pid has exited") {
    const pid_t gone = fork();
    REQUIRE(gone >= 0);
    if (gone == 0) _exit(0);
    REQUIRE(WaitChild(gone) == 0);
    WriteFile(lock, "{\"pid\": " + std::to_string(gone) + ", \"host\": \"" + HostName() +
                        "\", \"createdAt\": \"2026-01-01T00:00:00+00:00\"}\n");
    REQUIRE(timed_write(3000, &seconds));
    CHECK(seconds < 1.0);  // at once, not after the retry window
    CHECK(*store.BudgetChars(kKey) == 3000);
    CHECK(Listing(dir.path()) == std::set<std::string>{kKey + ".json"});
  }
  SECTION("an empty lock (TMCRA's JS/Python) older than 10 s") {
    WriteFile(lock, "");
    SetAge(lock, 20);
    REQUIRE(timed_write(3000, &seconds));
    CHECK(seconds < 1.0);
    CHECK(Listing(dir.path()) == std::set<std::string>{kKey + ".json"});
  }
  SECTION("a lock from another host is judged by age only") {
    WriteFile(lock, "{\"pid\": 999999999, \"host\": \"elsewhere.invalid\"}");
    CHECK_FALSE(timed_write(3000, &seconds));
    SetAge(lock, 11);
    REQUIRE(timed_write(3000, &seconds));
  }
  SECTION("a fresh empty lock is respected") {
    WriteFile(lock, "");
    auto r = timed_write(3000, &seconds);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "Memory controls busy; inspect the local lock");
    CHECK(seconds > 1.2);
    CHECK(Exists(lock));
    CHECK(*store.BudgetChars(kKey) == 2000);
  }
  SECTION("a fresh lock of a live pid is respected") {
    WriteFile(lock,
              "{\"pid\": " + std::to_string(getpid()) + ", \"host\": \"" + HostName() + "\"}");
    CHECK_FALSE(timed_write(3000, &seconds));
    CHECK(Exists(lock));
  }
  SECTION("a live pid's lock without flock (not a tmcra-mcp holder) is broken after 10 s") {
    WriteFile(lock,
              "{\"pid\": " + std::to_string(getpid()) + ", \"host\": \"" + HostName() + "\"}");
    SetAge(lock, 30);
    REQUIRE(timed_write(5000, &seconds));
    CHECK(*store.BudgetChars(kKey) == 5000);
    CHECK_FALSE(Exists(lock));
  }
}

namespace {

// `processes` forked writers, started together, each adding `each` tasks under its own session;
// busy answers are retried (what must never happen is a lost update). Returns the state.
json RunWriters(const std::string& root, int processes, int each) {
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(gate[1]);
      char go = 0;
      (void)!read(gate[0], &go, 1);
      ControlStore store(root);
      int failures = 0;
      for (int i = 0; i < each; ++i) {
        const json args{{"objective", "p" + std::to_string(p) + "-" + std::to_string(i)}};
        auto r = store.Control(kKey, "session-" + std::to_string(p), "task", args);
        for (int retry = 0; !r && r.error().code == Errc::kUnavailable && retry < 20; ++retry) {
          r = store.Control(kKey, "session-" + std::to_string(p), "task", args);
        }
        if (!r) ++failures;
      }
      _exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);  // all start together
  for (pid_t pid : children) CHECK(WaitChild(pid) == 0);
  return json::parse(ReadFile(root + "/" + kKey + ".json"));
}

std::set<std::string> Objectives(const json& state) {
  std::set<std::string> out;
  for (const auto& [id, task] : state["tasks"].items())
    out.insert(task["objective"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("memory controls: concurrent writers in several processes all land", "[controls][lock]") {
  TempDir dir;
  const json state = RunWriters(dir.File("state"), 4, 25);
  CHECK(state["tasks"].size() == 100);
  CHECK(Objectives(state).size() == 100);
  CHECK(state["sessions"].size() == 4);
  CHECK(Listing(dir.File("state")) == std::set<std::string>{kKey + ".json"});
}

TEST_CASE("memory controls: writers racing to break one stale lock lose no update",
          "[controls][lock]") {
  for (int trial = 0; trial < 5; ++trial) {
    INFO("trial " << trial);
    TempDir dir;
    const std::string lock = dir.File(kKey + ".lock");
    WriteFile(lock, "");  // left by a crashed JS/Python holder
    SetAge(lock, 30);
    const json state = RunWriters(dir.path(), 6, 5);
    CHECK(state["tasks"].size() == 30);
    CHECK(Objectives(state).size() == 30);
    CHECK(Listing(dir.path()) == std::set<std::string>{kKey + ".json"});
  }
}

TEST_CASE("memory controls: concurrent writers in one process (threads) all land",
          "[controls][lock]") {
  TempDir dir;
  ControlStore store(dir.path());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = store.Control(kKey, "thread-" + std::to_string(t), "task",
                               {{"objective", std::to_string(t) + "/" + std::to_string(i)}});
        for (int retry = 0; !r && r.error().code == Errc::kUnavailable && retry < 20; ++retry) {
          r = store.Control(kKey, "thread-" + std::to_string(t), "task",
                            {{"objective", std::to_string(t) + "/" + std::to_string(i)}});
        }
        if (!r) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(Ok(store.Control(kKey, "x", "dashboard", json::object()))["tasks"].size() == 40);
}
