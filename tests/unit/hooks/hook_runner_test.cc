// The hook events over the real embedded engine and a real outbox in a temp dir: a prompt is
// bound and given recalled memory in an untrusted envelope, its Stop stores the exact turn
// once, and the events around them (failures, subagents, compaction) store what they promise.
#include "src/hooks/hook_runner.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "filter/content_filter.h"
#include "src/api/embedded_memory_api.h"
#include "src/hooks/transcript.h"
#include "src/tools/outbox_sender.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::hooks::Event;
using tmcra::hooks::HookInput;
using tmcra::hooks::Host;
using tmcra::testing::TempDir;

namespace {

struct Fixture {
  TempDir dir;
  std::unique_ptr<tmcra::api::EmbeddedMemoryApi> memory;
  std::unique_ptr<tmcra::tools::MemoryApiSender> sender;
  std::unique_ptr<tmcra::queue::DeliveryService> delivery;
  tmcra::filter::ContentFilter filter{tmcra::filter::FilterRules{}};
  tmcra::hooks::HookDeps deps;

  Fixture() {
    tmcra::memory::EngineOptions options;
    options.path = dir.File("memory.db");
    memory = std::make_unique<tmcra::api::EmbeddedMemoryApi>(options);
    sender = std::make_unique<tmcra::tools::MemoryApiSender>(*memory);
    tmcra::queue::DeliveryOptions delivery_options;
    delivery_options.path = dir.File("outbox.sqlite3");
    delivery_options.owner = "pid-" + std::to_string(getpid()) + "-hooks-test";
    delivery = std::make_unique<tmcra::queue::DeliveryService>(delivery_options, *sender, nullptr);
    deps.tools.memory = memory.get();
    deps.tools.version = "0.1.0";
    deps.tools.delivery = delivery.get();
    deps.tools.filter = &filter;
    deps.options.store_scope = "proj-0123456789";
    deps.options.recall_scopes = {"proj-0123456789", "personal"};
  }
  ~Fixture() { delivery->Stop(); }

  std::string Run(const HookInput& in) {
    deps.options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto out = tmcra::hooks::RunHook(in, deps);
    REQUIRE(out);
    tmcra::hooks::RecordGiven(*out, deps);
    return out->output;
  }
  tmcra::queue::Outbox& Outbox() { return **delivery->outbox(); }
  // What the memory holds once every queued write is delivered (a hook delivers within its
  // deadline only; on a loaded machine a job may outlast it).
  int64_t Records() {
    for (int i = 0; i < 500; ++i) {
      auto open = Outbox().InStates({tmcra::queue::kPending, tmcra::queue::kSubmitted}, 100);
      REQUIRE(open);
      if (open->empty()) break;
      REQUIRE(delivery->DeliverBatch(*open));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto figures = memory->Stats();
    REQUIRE(figures);
    return (*figures).value("records", int64_t{-1});
  }
};

HookInput Prompt(const std::string& session, const std::string& text,
                 Host host = Host::kClaudeCode) {
  HookInput in;
  in.host = host;
  in.event = Event::kUserPromptSubmit;
  in.session_id = session;
  in.prompt = text;
  return in;
}

HookInput Stop(const std::string& session, const std::string& answer,
               Host host = Host::kClaudeCode) {
  HookInput in;
  in.host = host;
  in.event = Event::kStop;
  in.session_id = session;
  in.last_assistant_message = answer;
  return in;
}

std::string Context(const std::string& output) {
  if (output.empty()) return "";
  return json::parse(output)["hookSpecificOutput"]["additionalContext"].get<std::string>();
}

}  // namespace

TEST_CASE("a prompt and its Stop store the exact turn once, and the next session is given it",
          "[hooks]") {
  Fixture f;
  CHECK(f.Run(Prompt("s1", "My build cache server is at cache-7.internal:9040")).empty());
  CHECK(f.Run(Stop("s1", "Noted: cache-7.internal:9040 it is.")).empty());
  CHECK(f.Records() == 2);
  // A repeated Stop (the host ran it twice) stores nothing more.
  CHECK(f.Run(Stop("s1", "Noted: cache-7.internal:9040 it is.")).empty());
  CHECK(f.Records() == 2);

  const std::string context = Context(f.Run(Prompt("s2", "Where is the build cache server?")));
  CHECK(context.rfind("[[tmcra:recalled-memory]]", 0) == 0);
  CHECK(context.find("untrusted") != std::string::npos);
  CHECK(context.find("cache-7.internal:9040") != std::string::npos);
  // Given once per session: the same question again is given nothing new.
  CHECK(Context(f.Run(Prompt("s2", "Where is the build cache server, again?"))).empty());
  // After a compaction the session's model has lost it: given again.
  HookInput start;
  start.event = Event::kSessionStart;
  start.session_id = "s2";
  start.source = "compact";
  CHECK(f.Run(start).empty());
  CHECK(Context(f.Run(Prompt("s2", "Where is the build cache server now?")))
            .find("cache-7.internal:9040") != std::string::npos);
}

TEST_CASE("repeated short prompts are separate turns, and trivial ones recall nothing", "[hooks]") {
  Fixture f;
  f.Run(Prompt("s1", "Please remember the deploy key rotation happens on Mondays"));
  f.Run(Stop("s1", "Remembered: Mondays."));
  CHECK(f.Run(Prompt("s1", "yes")).empty());
  f.Run(Stop("s1", "First yes answered."));
  CHECK(f.Run(Prompt("s1", "yes")).empty());
  f.Run(Stop("s1", "Second yes answered."));
  CHECK(f.Records() == 6);
  auto turns = f.Outbox().GetSessionTurns("s1");
  REQUIRE(turns);
  CHECK(turns->count == 3);
  // A slash command is the host's: nothing is bound.
  CHECK(f.Run(Prompt("s1", "/compact")).empty());
  CHECK(f.Outbox().GetSessionTurns("s1")->count == 3);
}

TEST_CASE("the host's turn id is used, and Stop finds the turn by it", "[hooks]") {
  Fixture f;
  HookInput prompt = Prompt("s1", "Which port does the staging database use?", Host::kCodex);
  prompt.host_turn_id = "turn-abc";
  f.Run(prompt);
  HookInput stop = Stop("s1", "Port 6543.", Host::kCodex);
  stop.host_turn_id = "turn-abc";
  f.Run(stop);
  auto turn = f.Outbox().GetTurn("turn-abc");
  REQUIRE(turn);
  REQUIRE(*turn);
  CHECK((*turn)->state == "committed");
}

TEST_CASE("stop_hook_active does nothing, and a failed turn stores the prompt without an answer",
          "[hooks]") {
  Fixture f;
  f.Run(Prompt("s1", "Summarise the release checklist for version 4"));
  HookInput again = Stop("s1", "A continuation answer");
  again.stop_hook_active = true;
  f.Run(again);
  CHECK(f.Records() == 0);
  HookInput failure;
  failure.event = Event::kStopFailure;
  failure.session_id = "s1";
  failure.error = "overloaded";
  f.Run(failure);
  CHECK(f.Records() == 1);
  // The Stop that may follow finds the turn committed and writes nothing more.
  f.Run(Stop("s1", "late"));
  CHECK(f.Records() == 1);
}

TEST_CASE("a subagent's final message is stored as its agent's, never its prompt as the user's",
          "[hooks]") {
  Fixture f;
  HookInput in;
  in.event = Event::kSubagentStop;
  in.session_id = "s1";
  in.agent_id = "a1";
  in.agent_type = "Explore";
  in.last_assistant_message = "The parser lives in src/mcp/jsonrpc.cc.";
  f.Run(in);
  f.Run(in);  // idempotent
  CHECK(f.Records() == 1);
  auto recall = f.memory->Recall("proj-0123456789", {{"query", "parser jsonrpc"}}, {});
  REQUIRE(recall);
  const std::string text = (*recall)["prompt_evidence"]["content"];
  CHECK(text.find("actor=assistant") != std::string::npos);
  CHECK(text.find("actor=user") == std::string::npos);
  CHECK(text.find("s1:subagent:a1") != std::string::npos);
}

TEST_CASE("PreCompact stores the transcript's turns not stored yet, once", "[hooks]") {
  Fixture f;
  f.Run(Prompt("s1", "What does the outbox guarantee after a crash?"));
  f.Run(Stop("s1", "Nothing acknowledged is lost."));
  f.Run(Prompt("s1", "And what about duplicates after a retry?"));  // Stop never came
  const std::string path = f.dir.File("t.jsonl");
  {
    std::ofstream out(path);
    const auto line = [&out](const char* type, const std::string& text) {
      out << json{{"type", type},
                  {"message",
                   {{"role", type},
                    {"content", json::array({{{"type", "text"}, {"text", text}}})}}}}
                 .dump()
          << "\n";
    };
    line("user", "A turn from before the hooks were installed, about backups");
    line("assistant", "Backups run nightly.");
    line("user", "What does the outbox guarantee after a crash?");
    line("assistant", "Nothing acknowledged is lost.");
    line("user", "And what about duplicates after a retry?");
    line("assistant", "Keys make retries replays.");
    out << "not json\n";
  }
  HookInput in;
  in.event = Event::kPreCompact;
  in.session_id = "s1";
  in.transcript_path = path;
  f.Run(in);
  // The last turn may still be running (an automatic compaction mid-turn): its Stop stores it.
  CHECK(f.Records() == 4);
  f.Run(in);
  CHECK(f.Records() == 4);
  HookInput stop = Stop("s1", "Keys make retries replays.");
  stop.transcript_path = path;
  f.Run(stop);
  CHECK(f.Records() == 6);
}

TEST_CASE("a slash command's answer is never taken for the turn before it", "[hooks]") {
  Fixture f;
  f.Run(Prompt("s1", "Refactor the parser into smaller functions please"));  // interrupted: no Stop
  CHECK(f.Run(Prompt("s1", "/review")).empty());
  const std::string path = f.dir.File("claude.jsonl");
  {
    std::ofstream out(path);
    out << json{{"type", "user"},
                {"message",
                 {{"role", "user"},
                  {"content", "Refactor the parser into smaller functions please"}}}}
               .dump()
        << "\n";
    out << json{{"type", "user"},
                {"message",
                 {{"role", "user"}, {"content", "<command-name>/review</command-name>"}}}}
               .dump()
        << "\n";
    out << json{{"type", "user"},
                {"isMeta", true},
                {"message", {{"role", "user"}, {"content", "Review the diff"}}}}
               .dump()
        << "\n";
    out << json{{"type", "assistant"},
                {"message",
                 {{"role", "assistant"},
                  {"content",
                   json::array({{{"type", "text"}, {"text", "The review found nothing."}}})}}}}
               .dump()
        << "\n";
  }
  HookInput stop = Stop("s1", "The review found nothing.");
  stop.transcript_path = path;
  f.Run(stop);
  CHECK(f.Records() == 0);
  auto turns = f.Outbox().GetSessionTurns("s1");
  REQUIRE(turns);
  CHECK((*f.Outbox().GetTurn(*turns->latest_turn_id))->state == "prepared");
}

TEST_CASE("the envelope keeps to its byte cap and says what it left out", "[hooks]") {
  Fixture f;
  for (int i = 0; i < 6; ++i) {
    f.Run(Prompt("s1", "Fact " + std::to_string(i) + ": the widget service depends on " +
                           std::string(300, static_cast<char>('a' + i))));
    f.Run(Stop("s1", "Noted fact " + std::to_string(i) + " about the widget service."));
  }
  f.deps.options.context_bytes = 1500;
  const std::string context =
      Context(f.Run(Prompt("s2", "What does the widget service depend on?")));
  REQUIRE_FALSE(context.empty());
  CHECK(context.size() <= 1500);
  CHECK(context.find("left out to stay within 1500 bytes") != std::string::npos);
}

TEST_CASE("hook input is read for each host and refused clearly when malformed", "[hooks]") {
  using tmcra::hooks::ParseHookInput;
  auto codex =
      ParseHookInput(Host::kCodex, Event::kStop,
                     R"({"session_id":"s","turn_id":"t1","hook_event_name":"Stop",)"
                     R"("last_assistant_message":null,"stop_hook_active":false,"model":"m"})");
  REQUIRE(codex);
  CHECK(codex->host_turn_id == "t1");
  CHECK_FALSE(codex->last_assistant_message);
  auto claude = ParseHookInput(Host::kClaudeCode, Event::kUserPromptSubmit,
                               R"({"session_id":"s","prompt_id":"p1","prompt":"hi"})");
  REQUIRE(claude);
  CHECK(claude->host_turn_id == "p1");
  CHECK(ParseHookInput(Host::kCodex, Event::kStop, "").error().message.find("not a JSON") !=
        std::string::npos);
  CHECK(ParseHookInput(Host::kCodex, Event::kStop, "[1]").error().message ==
        "hook input: must be a JSON object");
  CHECK(ParseHookInput(Host::kCodex, Event::kUserPromptSubmit, R"({"session_id":"s","prompt":7})")
            .error()
            .message == "hook input.prompt: must be a string");
  CHECK(ParseHookInput(Host::kCodex, Event::kStop, R"({"prompt":"x"})").error().message ==
        "hook input.session_id: missing");
  CHECK(ParseHookInput(Host::kCodex, Event::kStop, R"({"session_id":"s","hook_event_name":"Nope"})")
            .error()
            .message.find("not Stop") != std::string::npos);
  CHECK_FALSE(ParseHookInput(Host::kCodex, Event::kStop, "{\"session_id\":\"\xff\"}"));
  CHECK_FALSE(tmcra::hooks::ParseEventName("Unknown"));
}

TEST_CASE("a Stop whose prompt was never bound stores the turn from the transcript, once",
          "[hooks]") {
  Fixture f;
  HookInput first = Prompt("s1", "Which region hosts the primary database?", Host::kCodex);
  first.host_turn_id = "t1";
  f.Run(first);  // bound, but its Stop never came
  const std::string path = f.dir.File("rollout.jsonl");
  {
    std::ofstream out(path);
    const auto event = [&out](const char* type, const std::string& text) {
      out << json{{"type", "event_msg"}, {"payload", {{"type", type}, {"message", text}}}}.dump()
          << "\n";
    };
    event("user_message", "Which region hosts the primary database?");
    event("user_message", "What is the on-call rotation length?");  // its hook died before binding
    event("agent_message", "One week.");
  }
  HookInput stop = Stop("s1", "One week.", Host::kCodex);
  stop.host_turn_id = "t2";  // unknown: t1 must not be given t2's answer
  stop.transcript_path = path;
  f.Run(stop);
  CHECK(f.Records() == 2);
  CHECK((*f.Outbox().GetTurn("t1"))->state == "prepared");
  f.Run(stop);
  CHECK(f.Records() == 2);
}

TEST_CASE(
    "SessionStart gives a brief only when asked, and PostToolUse stores a clipped observation",
    "[hooks]") {
  Fixture f;
  f.Run(Prompt("s1", "The release train leaves every second Thursday"));
  f.Run(Stop("s1", "Noted: the release train leaves every second Thursday."));
  HookInput start;
  start.event = Event::kSessionStart;
  start.session_id = "s2";
  start.source = "startup";
  CHECK(f.Run(start).empty());
  f.deps.options.session_brief = true;
  CHECK(Context(f.Run(start)).find("release train") != std::string::npos);

  HookInput tool;
  tool.event = Event::kPostToolUse;
  tool.session_id = "s1";
  tool.tool_name = "Bash";
  tool.tool_input = {{"command", "ls " + std::string(2000, 'x')}};
  tool.tool_response = "ok";
  f.Run(tool);
  CHECK(f.Records() == 2);  // off by default
  f.deps.options.observe_tools = true;
  f.Run(tool);
  f.Run(tool);  // the same call again: stored once
  CHECK(f.Records() == 3);
}

TEST_CASE("a resumed conversation under a new session id does not store its earlier turns again",
          "[hooks]") {
  Fixture f;
  f.Run(Prompt("old", "How long are the retention windows for audit logs?"));
  f.Run(Stop("old", "Ninety days."));
  const std::string path = f.dir.File("resumed.jsonl");
  {
    std::ofstream out(path);
    const auto line = [&out](const char* type, const std::string& text) {
      out << json{{"type", type}, {"message", {{"role", type}, {"content", text}}}}.dump() << "\n";
    };
    line("user", "How long are the retention windows for audit logs?");
    line("assistant", "Ninety days.");
    line("user", "And for access logs?");
    line("assistant", "Thirty days.");
    line("user", "Thanks, anything else?");
  }
  HookInput compact;
  compact.event = Event::kPreCompact;
  compact.session_id = "new";
  compact.transcript_path = path;
  f.Run(compact);
  CHECK(f.Records() == 4);  // the access-log turn only
}

namespace {

HookInput GeminiPrompt(const std::string& session, const std::string& prompt) {
  HookInput in = Prompt(session, tmcra::hooks::GeminiTypedPrompt(prompt), Host::kGeminiCli);
  return in;
}

// Gemini CLI's AfterAgent; no response is its "[no response text]".
HookInput GeminiAfterAgent(const std::string& session, const std::string& prompt,
                           const std::optional<std::string>& response) {
  HookInput in = Stop(session, response.value_or(""));
  in.host = Host::kGeminiCli;
  in.prompt = tmcra::hooks::GeminiTypedPrompt(prompt);
  in.last_assistant_message = response;
  in.timestamp = "2026-12-06T08:02:07.209Z";
  return in;
}

// A Gemini CLI transcript as Gemini CLI writes it: a header, message lines with ids (a message
// written again under its id when its token counts or tool calls are added), `$set` patches.
class GeminiTranscript {
 public:
  explicit GeminiTranscript(std::string path) : path_(std::move(path)), out_(path_) {
    out_ << json{{"sessionId", "g1"}, {"projectHash", "ab12"}, {"kind", "main"}}.dump() << "\n";
  }
  // A user message: `sent`, the parts that went to the model; `typed`, its displayContent.
  std::string User(const json& sent, const json& typed = nullptr) {
    json line{{"id", NextId()}, {"type", "user"}, {"content", sent}};
    if (!typed.is_null()) line["displayContent"] = typed;
    return Write(line);
  }
  std::string Gemini(const std::string& text, const json& tool_calls = nullptr) {
    return Gemini(NextId(), text, tool_calls);
  }
  // The message `id` (written again when it exists already).
  std::string Gemini(const std::string& id, const std::string& text, const json& tool_calls) {
    json line{{"id", id},
              {"type", "gemini"},
              {"content", text},
              {"thoughts", json::array()},
              {"tokens", {{"input", 100}, {"output", 10}}},
              {"model", "gemini-2.5-flash"}};
    if (!tool_calls.is_null()) line["toolCalls"] = tool_calls;
    return Write(line);
  }
  void Line(const json& line) { out_ << line.dump() << "\n" << std::flush; }

 private:
  std::string NextId() { return "msg-" + std::to_string(++count_); }
  std::string Write(const json& line) {
    Line(line);
    Line({{"$set", {{"lastUpdated", "2026-12-06T08:02:07.209Z"}}}});
    return line["id"];
  }
  std::string path_;
  std::ofstream out_;
  int count_ = 0;
};

json Parts(std::initializer_list<std::string> texts) {
  json parts = json::array();
  for (const auto& text : texts) parts.push_back({{"text", text}});
  return parts;
}

// What Gemini CLI makes of a hook's additionalContext.
std::string Escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("Gemini CLI: its event names, the prompt as typed, prompt_response as the answer",
          "[hooks]") {
  using tmcra::hooks::EventName;
  using tmcra::hooks::GeminiTypedPrompt;
  using tmcra::hooks::ParseEventName;
  using tmcra::hooks::ParseHookInput;
  CHECK(tmcra::hooks::ParseHost("gemini-cli") == Host::kGeminiCli);
  CHECK(std::string(tmcra::hooks::HostName(Host::kGeminiCli)) == "gemini-cli");
  CHECK(ParseEventName("BeforeAgent", Host::kGeminiCli) == Event::kUserPromptSubmit);
  CHECK(ParseEventName("AfterAgent", Host::kGeminiCli) == Event::kStop);
  CHECK(ParseEventName("AfterTool", Host::kGeminiCli) == Event::kPostToolUse);
  CHECK(ParseEventName("SessionEnd", Host::kGeminiCli) == Event::kSessionEnd);
  CHECK_FALSE(ParseEventName("UserPromptSubmit", Host::kGeminiCli));
  CHECK_FALSE(ParseEventName("PreCompress", Host::kGeminiCli));
  CHECK_FALSE(ParseEventName("BeforeAgent"));
  CHECK(std::string(EventName(Event::kStop, Host::kGeminiCli)) == "AfterAgent");
  CHECK(std::string(EventName(Event::kStop)) == "Stop");

  CHECK(GeminiTypedPrompt("<hook_context>brief &lt;x&gt;</hook_context>\n\nWhat changed?") ==
        "What changed?");
  CHECK(GeminiTypedPrompt("Summarize @a.txt\n--- Content from referenced files ---\nContent from "
                          "@a.txt:\nhello\n--- End of content ---") == "Summarize @a.txt");
  CHECK(GeminiTypedPrompt("<hook_context>unclosed") == "<hook_context>unclosed");
  CHECK(GeminiTypedPrompt("a <hook_context>x</hook_context>") ==
        "a <hook_context>x</hook_context>");
  CHECK(GeminiTypedPrompt("<hook_context>only context</hook_context>").empty());
  // What the user typed is kept: a tag not followed by a blank line and the prompt, and the
  // marker of referenced files with no block of them ending the prompt.
  CHECK(GeminiTypedPrompt("<hook_context>is a tag</hook_context> I typed") ==
        "<hook_context>is a tag</hook_context> I typed");
  const std::string marker =
      "Why is this line\n--- Content from referenced files ---\nin my prompt? It ends here.";
  CHECK(GeminiTypedPrompt(marker) == marker);
  // A file that quotes the end marker is cut whole, with the context before the prompt.
  CHECK(GeminiTypedPrompt("<hook_context>b</hook_context>\n\nSummarize @a.txt\n--- Content from "
                          "referenced files ---\nContent from @a.txt:\nx\n--- End of content "
                          "---\ny\n--- End of content ---") == "Summarize @a.txt");

  auto before = ParseHookInput(
      Host::kGeminiCli, Event::kUserPromptSubmit,
      R"({"session_id":"s","hook_event_name":"BeforeAgent","timestamp":"2026-12-06T08:02:06Z",)"
      R"("prompt":"<hook_context>ctx</hook_context>\n\nWhere is the cache?"})");
  REQUIRE(before);
  CHECK(before->prompt == "Where is the cache?");
  CHECK(before->host_turn_id.empty());
  auto after = ParseHookInput(Host::kGeminiCli, Event::kStop,
                              R"({"session_id":"s","hook_event_name":"AfterAgent","prompt":"q",)"
                              R"("prompt_response":"one\ntwo","stop_hook_active":false,)"
                              R"("timestamp":"2026-12-06T08:02:07.209Z"})");
  REQUIRE(after);
  CHECK(after->last_assistant_message == "one\ntwo");
  CHECK(after->timestamp == "2026-12-06T08:02:07.209Z");
  auto none = ParseHookInput(Host::kGeminiCli, Event::kStop,
                             R"({"session_id":"s","prompt_response":"[no response text]"})");
  REQUIRE(none);
  CHECK_FALSE(none->last_assistant_message);
  CHECK(ParseHookInput(Host::kGeminiCli, Event::kStop,
                       R"({"session_id":"s","hook_event_name":"Stop"})")
            .error()
            .message == "hook input.hook_event_name: is Stop, not AfterAgent");
  CHECK(ParseHookInput(Host::kGeminiCli, Event::kStop, R"({"session_id":"s","prompt_response":1})")
            .error()
            .message == "hook input.prompt_response: must be a string");
  auto tool = ParseHookInput(
      Host::kGeminiCli, Event::kPostToolUse,
      R"({"session_id":"s","tool_name":"read_file","tool_input":{"file_path":"a.txt"},)"
      R"("tool_response":{"llmContent":"hello file\n","returnDisplay":""}})");
  REQUIRE(tool);
  CHECK(tool->tool_response == "hello file\n");
}

TEST_CASE("Gemini CLI: BeforeAgent binds and recalls, AfterAgent stores the turn once", "[hooks]") {
  Fixture f;
  const std::string fact = "My build cache server is at cache-7.internal:9040";
  // Under -p a SessionStart hook's context comes before the prompt: it is not the user's.
  CHECK(f.Run(GeminiPrompt("g1", "<hook_context>other hook</hook_context>\n\n" + fact)) == "");
  CHECK(f.Run(GeminiAfterAgent("g1", fact, "Noted: cache-7.internal:9040.")).empty());
  CHECK(f.Records() == 2);
  f.Run(GeminiAfterAgent("g1", fact, "Noted: cache-7.internal:9040."));  // run again
  HookInput again = GeminiAfterAgent("g1", fact, "A continuation");
  again.stop_hook_active = true;
  f.Run(again);
  CHECK(f.Records() == 2);

  const std::string output = f.Run(GeminiPrompt("g2", "Where is the build cache server?"));
  CHECK(json::parse(output)["hookSpecificOutput"]["hookEventName"] == "BeforeAgent");
  const std::string context = Context(output);
  CHECK(context.find("cache-7.internal:9040") != std::string::npos);
  // The model's answer quotes the context as Gemini CLI gave it (escaped): not stored again.
  f.Run(GeminiAfterAgent("g2", "Where is the build cache server?",
                         "You gave me " + Escaped(context) + " so: cache-7."));
  CHECK(f.Records() == 4);
  auto recall = f.memory->Recall("proj-0123456789", {{"query", "so: cache-7"}}, {});
  REQUIRE(recall);
  const std::string text = (*recall)["prompt_evidence"]["content"];
  CHECK(text.find("so: cache-7.") != std::string::npos);
  CHECK(text.find("tmcra-memory") == std::string::npos);
  CHECK(text.find("untrusted data") == std::string::npos);
}

TEST_CASE("Gemini CLI: AfterAgent stores a turn its BeforeAgent never bound, once", "[hooks]") {
  Fixture f;
  f.Run(GeminiPrompt("g1", "Which region hosts the primary database?"));
  f.Run(GeminiAfterAgent("g1", "Which region hosts the primary database?", "eu-west-3."));
  // The next prompt's hook did not run (the binary was missing); AfterAgent did.
  HookInput missed = GeminiAfterAgent("g1", "And the replica?", "eu-central-1.");
  missed.transcript_path = f.dir.File("missing.jsonl");
  f.Run(missed);
  CHECK(f.Records() == 4);
  f.Run(missed);
  CHECK(f.Records() == 4);
}

TEST_CASE("Gemini CLI: SessionStart gives nothing, the envelope's cap counts escaped brackets",
          "[hooks]") {
  Fixture f;
  for (int i = 0; i < 6; ++i) {
    const std::string prompt = "Fact " + std::to_string(i) + ": the widget template is " +
                               std::string(150, '<') + std::string(150, '>');
    f.Run(GeminiPrompt("g1", prompt));
    f.Run(GeminiAfterAgent("g1", prompt, "Noted widget fact " + std::to_string(i) + "."));
  }
  f.deps.options.session_brief = true;
  HookInput start;
  start.host = Host::kGeminiCli;
  start.event = Event::kSessionStart;
  start.session_id = "g2";
  start.source = "startup";
  CHECK(f.Run(start).empty());

  f.deps.options.context_bytes = 2000;
  const std::string context =
      Context(f.Run(GeminiPrompt("g2", "What is the widget template made of?")));
  REQUIRE_FALSE(context.empty());
  CHECK(Escaped(context).size() <= 2000);
  CHECK(context.find("left out to stay within 2000 bytes") != std::string::npos);
}

TEST_CASE("Gemini CLI's transcript: turns as typed, each message once by id, memory ids escaped",
          "[hooks]") {
  const tmcra::testing::TempDir dir;
  const std::string path = dir.File("session.jsonl");
  {
    GeminiTranscript t(path);
    t.Line(
        {{"$set",
          {{"messages",
            json::array(
                {{{"id", "m0"},
                  {"type", "user"},
                  {"content", Parts({"<session_context>x</session_context>"})}},
                 {{"id", "m1"}, {"type", "user"}, {"content", Parts({"A turn before the resume"})}},
                 {{"id", "m2"}, {"type", "gemini"}, {"content", "Old."}}})}}}});
    // Under -p another hook's SessionStart context comes first in the prompt's own part.
    const std::string typed =
        "<hook_context>THEIR-BRIEF &lt;b&gt;</hook_context>\n\nWhere is the cache?";
    t.User(Parts({typed,
                  "<hook_context>[[tmcra:recalled-memory]]\n&lt;tmcra-memory "
                  "trust=\"untrusted\"&gt;\n[Immutable source window 1 | actor=user | "
                  "memory_id=rec_abc123]\nfact\n&lt;/tmcra-memory&gt;\n[[/tmcra:recalled-memory]]"
                  "</hook_context>"}),
           Parts({typed}));
    // Written again under its id with its tool call's status; then the tool's result.
    const std::string look = t.Gemini("Let me look.");
    const json call{{"id", "read_file_1"}, {"name", "read_file"}, {"status", "success"}};
    t.Gemini(look, "Let me look.", json::array({call}));
    t.User(json::array({{{"functionResponse", {{"id", "read_file_1"}, {"name", "read_file"}}}}}));
    const std::string found = t.Gemini("At cache-7.");
    t.Gemini(found, "At cache-7.", nullptr);
    t.Line({{"id", "note-1"}, {"type", "info"}, {"content", "note"}});
    // An @file's content, with no displayContent: the parts as sent.
    t.User(Parts({"Summarize @a.txt for me", "\n--- Content from referenced files ---",
                  "\nContent from @a.txt:\n", "hello file", "\n--- End of content ---",
                  "<hook_context>ctx</hook_context>"}));
    t.Gemini("It says hello.");
    // A turn rewound away (/rewind).
    const std::string rewound = t.User(Parts({"A prompt taken back"}));
    t.Gemini("Gone.");
    t.Line({{"$rewindTo", rewound}});
  }
  auto turns = tmcra::hooks::ReadTranscript(Host::kGeminiCli, path);
  REQUIRE(turns);
  REQUIRE(turns->size() == 3);
  CHECK((*turns)[0].user == "A turn before the resume");
  CHECK((*turns)[0].assistant == "Old.");
  CHECK((*turns)[1].user == "Where is the cache?");
  CHECK((*turns)[1].assistant == "Let me look.\nAt cache-7.");
  CHECK((*turns)[2].user == "Summarize @a.txt for me");
  CHECK((*turns)[2].assistant == "It says hello.");
  CHECK(tmcra::hooks::GivenMemoryIds(path) == std::set<std::string>{"memory:rec_abc123"});
}

TEST_CASE("Gemini CLI: a turn without response text is stored alone, not with another's answer",
          "[hooks]") {
  Fixture f;
  const std::string path = f.dir.File("session.jsonl");
  GeminiTranscript t(path);
  const std::string first = "Which region hosts the primary database?";
  f.Run(GeminiPrompt("g1", first));
  t.User(Parts({first}));
  t.Gemini("eu-west-3.");
  f.Run(GeminiAfterAgent("g1", first, "eu-west-3."));
  CHECK(f.Records() == 2);
  // Under -p, behind another hook's SessionStart context; the model only called a tool.
  const std::string sent = "<hook_context>THEIR-BRIEF</hook_context>\n\nList the replicas please";
  f.Run(GeminiPrompt("g1", sent));
  t.User(Parts({sent}), Parts({sent}));
  t.Gemini("", json::array({{{"id", "c1"}, {"name", "list"}, {"status", "success"}}}));
  HookInput none = GeminiAfterAgent("g1", sent, std::nullopt);
  none.transcript_path = path;
  f.Run(none);
  CHECK(f.Records() == 3);
}

TEST_CASE("a Stop without an answer takes the transcript's only when its last turn is the turn's",
          "[hooks]") {
  Fixture f;
  HookInput first = Prompt("s1", "Which region hosts the primary database?", Host::kCodex);
  first.host_turn_id = "t1";
  f.Run(first);
  HookInput stop = Stop("s1", "eu-west-3.", Host::kCodex);
  stop.host_turn_id = "t1";
  f.Run(stop);
  HookInput second = Prompt("s1", "And where do the replicas run?", Host::kCodex);
  second.host_turn_id = "t2";
  f.Run(second);
  // The rollout file does not hold the second turn yet: its last answer is the first turn's.
  const std::string path = f.dir.File("rollout.jsonl");
  {
    std::ofstream out(path);
    const auto event = [&out](const char* type, const std::string& text) {
      out << json{{"type", "event_msg"}, {"payload", {{"type", type}, {"message", text}}}}.dump()
          << "\n";
    };
    event("user_message", "Which region hosts the primary database?");
    event("agent_message", "eu-west-3.");
  }
  stop.host_turn_id = "t2";
  stop.last_assistant_message.reset();
  stop.transcript_path = path;
  f.Run(stop);
  CHECK((*f.Outbox().GetTurn("t2"))->state == "committed");
  CHECK(f.Records() == 3);
}

TEST_CASE("Gemini CLI: a turn only AfterAgent saw is stored once, its prompt stored before or not",
          "[hooks]") {
  Fixture f;
  const std::string question = "Which region hosts the primary database?";
  f.Run(GeminiPrompt("g0", question));
  f.Run(GeminiAfterAgent("g0", question, "eu-west-3."));
  CHECK(f.Records() == 2);
  // Another session, the same prompt, its BeforeAgent missed (no transcript to read).
  f.Run(GeminiAfterAgent("g1", question, "Still eu-west-3."));
  CHECK(f.Records() == 4);
  f.Run(GeminiAfterAgent("g1", question, "Still eu-west-3."));  // delivered again
  CHECK(f.Records() == 4);
  // In one session: asked, something else, asked again with its BeforeAgent missed.
  f.Run(GeminiPrompt("g1", "What else runs in eu-west-3?"));
  f.Run(GeminiAfterAgent("g1", "What else runs in eu-west-3?", "The cache."));
  CHECK(f.Records() == 6);
  f.Run(GeminiAfterAgent("g1", question, "Moved to eu-central-1."));
  CHECK(f.Records() == 8);
  f.Run(GeminiAfterAgent("g1", question, "Moved to eu-central-1."));
  f.Run(GeminiAfterAgent("g1", "What else runs in eu-west-3?", "The cache."));
  CHECK(f.Records() == 8);
  // Answered word for word as before: taken for that turn, whose text is stored already.
  f.Run(GeminiAfterAgent("g1", question, "Still eu-west-3."));
  CHECK(f.Records() == 8);
  // A bound turn its AfterAgent never ended (the model call failed) takes a later answer.
  f.Run(GeminiPrompt("g2", "How are the replicas monitored?"));
  const auto count = f.Outbox().GetSessionTurns("g2")->count;
  f.Run(GeminiAfterAgent("g2", "What pages the on-call?", "The pager."));
  f.Run(GeminiAfterAgent("g2", "How are the replicas monitored?", "By probes."));
  CHECK(f.Records() == 12);
  CHECK(f.Outbox().GetSessionTurns("g2")->count == count + 1);
}

TEST_CASE("Gemini CLI: two identical tool calls of a session are two observations", "[hooks]") {
  Fixture f;
  f.deps.options.observe_tools = true;
  HookInput tool;
  tool.host = Host::kGeminiCli;
  tool.event = Event::kPostToolUse;
  tool.session_id = "g1";
  tool.tool_name = "read_file";
  tool.tool_input = {{"file_path", "a.txt"}};
  tool.tool_response = "hello file\n";
  tool.timestamp = "2026-12-06T08:02:39.005Z";
  f.Run(tool);
  f.Run(tool);  // the same event again
  CHECK(f.Records() == 1);
  tool.timestamp = "2026-12-06T08:03:12.120Z";
  f.Run(tool);
  CHECK(f.Records() == 2);
}
