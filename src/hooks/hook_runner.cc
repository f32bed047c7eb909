#include "src/hooks/hook_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/failpoint.h"
#include "base/identifiers.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "filter/content_filter.h"
#include "src/hooks/memory_envelope.h"
#include "src/hooks/transcript.h"
#include "src/tools/content_filtering.h"

namespace tmcra::hooks {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The most characters a stored message holds (the tools' maxLength).
constexpr size_t kMaxMessageChars = 200000;
// Prompts that are acknowledgements, not questions: they recall nothing (they are still stored).
constexpr std::string_view kTrivialPrompts[] = {
    "ok",    "okay",     "yes",     "no",   "y",    "n",     "thanks", "thank you", "ty",   "go",
    "go on", "continue", "proceed", "done", "sure", "great", "nice",   "cool",      "lgtm", "k"};

// In-process tool calls: no client to elicit from; cancelled once the deadline has passed.
class HookToolContext final : public mcp::ToolContext {
 public:
  explicit HookToolContext(Clock::time_point deadline) : deadline_(deadline) {}
  std::string protocol_version() const override { return "2025-11-25"; }
  bool cancelled() const override { return Clock::now() >= deadline_; }
  bool can_elicit() const override { return false; }
  Result<mcp::ElicitResponse> Elicit(const std::string&, const json&,
                                     std::chrono::milliseconds) override {
    return Error::Unavailable("a hook has no client to ask");
  }

 private:
  Clock::time_point deadline_;
};

Result<json> Structured(mcp::ToolResult result) {
  if (result.is_error) return Error::Internal(result.error_text);
  return std::move(result.structured);
}

// An ingest the hooks key by its content: a second one for the same content (the event run
// again) differs only in its timestamp, and the outbox refuses it as another body under the
// key. That message is stored already.
Result<json> Ingested(mcp::ToolResult result) {
  if (result.is_error &&
      result.error_text.find("idempotency key is already bound") != std::string::npos) {
    return json{{"already_stored", true}};
  }
  return Structured(std::move(result));
}

// A subagent's memory session: its parent's, with the agent named (TMCRA's plugin rule).
std::string MemorySession(const HookInput& in) {
  std::string session =
      in.agent_id.empty() ? in.session_id : in.session_id + ":subagent:" + in.agent_id;
  // The tools take session ids of at most 200 characters.
  if (session.size() > 200) session = "session-" + Sha256Hex(session).substr(0, 40);
  return session;
}

// The id of the host's turn, as the hooks store it: the host's own where it gives one (longer
// ones hashed to fit the tools' 200 characters); empty when it gives none.
std::string HostTurnId(const HookInput& in) {
  if (in.host_turn_id.size() <= 200) return in.host_turn_id;
  return "host-" + Sha256Hex(in.host_turn_id).substr(0, 40);
}

// The mark that a prompt of the session was deliberately not stored (the memory controls turned
// memory off): a transcript read later must not store it either.
std::string SkipMark(const std::string& filtered_prompt) {
  return "skip:" + Sha256Hex(filtered_prompt);
}

std::string Filtered(const HookDeps& deps, const std::string& text) {
  tools::Filtering ignored;
  return tools::FilterText(deps.tools.filter, text, ignored);
}

bool IsTrivialPrompt(const std::string& prompt, size_t min_chars) {
  if (CodePointLength(prompt) < min_chars) return true;
  std::string lowered;
  for (char c : prompt) {
    if (c == '.' || c == '!') continue;
    lowered.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  }
  return std::find(std::begin(kTrivialPrompts), std::end(kTrivialPrompts), lowered) !=
         std::end(kTrivialPrompts);
}

// The host's output that adds `context` to the model's context for `event`.
std::string ContextOutput(Host host, Event event, const std::string& context) {
  if (context.empty()) return "";
  return json{{"hookSpecificOutput",
               {{"hookEventName", EventName(event, host)}, {"additionalContext", context}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

// The memory blocks a recall of `query` from `scope` gives, under that scope's memory controls
// (as tmcra_recall: none when they turn reading off). A failure is logged and gives none.
std::vector<MemoryBlock> RecallBlocks(const HookDeps& deps, const std::string& scope,
                                      const std::string& session, const std::string& query) {
  tools::RecallRequest request;
  request.scope = scope;
  request.session_id = session;
  request.query = query;
  request.evidence_unused = true;
  if (deps.tools.controls != nullptr) {
    auto controls = deps.tools.controls->ForRecall(deps.tools.control_key(scope), session, query);
    if (!controls || !controls->policy.read) return {};
    request.read_controls = std::move(*controls);
  }
  auto receipt = tools::RecallForTool(deps.tools, request);
  if (!receipt) {
    spdlog::warn("hook: recall from scope {} failed: {}", scope, receipt.error().message);
    return {};
  }
  return MemoryBlocks(*receipt);
}

// Recalls `query` from every recall scope (the project's, then the personal one).
std::vector<MemoryBlock> RecallAllScopes(const HookDeps& deps, const std::string& session,
                                         const std::string& query) {
  std::vector<MemoryBlock> blocks;
  for (const std::string& scope : deps.options.recall_scopes) {
    for (auto& block : RecallBlocks(deps, scope, session, query))
      blocks.push_back(std::move(block));
  }
  return blocks;
}

// The answer that gives `blocks` to the session's model, minus what it has. Recorded as given
// only once printed (RecordGiven).
// What the model has: the memory given to the session (recorded by the hooks) and the memory
// its transcript holds since the last compaction (a forked conversation carries what it was
// given under another session id).
// What a prompt was given: its query, the blocks recalled, given, given before and left out
// for the byte budget.
json LastRecallNote(const HookInput& in, const std::vector<MemoryBlock>& blocks,
                    const std::set<std::string>& given_before, const Envelope& envelope,
                    const HookDeps& deps) {
  int64_t recalled = 0;
  int64_t already = 0;
  for (const MemoryBlock& b : blocks) {
    if (b.header_only) continue;
    ++recalled;
    if (given_before.count(b.key) > 0) ++already;
  }
  const auto given = static_cast<int64_t>(envelope.keys.size());
  return json{{"at", FormatIsoUtc(NowSeconds())},
              {"by", "hook"},
              {"session", in.session_id},
              {"query", Filtered(deps, Trim(in.prompt))},
              {"recalled_blocks", recalled},
              {"given_blocks", given},
              {"already_given", already},
              {"left_out", std::max<int64_t>(0, recalled - given - already)},
              {"given", envelope.keys},
              {"bytes", envelope.text.size()},
              {"cap_bytes", deps.options.context_bytes}};
}

// The transcript is read once per session and context (until a compaction or clear forgets the
// recorded keys, kTranscriptRead with them): what it holds is recorded with the answer, so later
// prompts find it in the outbox instead of reading the file again.
HookAnswer GiveBlocks(const HookInput& in, const std::vector<MemoryBlock>& blocks,
                      const std::string& session, HookDeps& deps) {
  constexpr std::string_view kTranscriptRead = "transcript:read";
  const Event event = in.event;
  HookAnswer answer;
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return answer;
  auto given = (*outbox)->InjectedBlocks(session);
  if (!given) return answer;
  std::set<std::string> held;
  if (!in.transcript_path.empty() && given->count(std::string(kTranscriptRead)) == 0) {
    held = GivenMemoryIds(in.transcript_path);
    held.emplace(kTranscriptRead);
    given->insert(held.begin(), held.end());
  }
  Envelope envelope = BuildEnvelope(blocks, *given, session, deps.options.context_bytes,
                                    /*angles_escaped=*/in.host == Host::kGeminiCli);
  if (event == Event::kUserPromptSubmit) {
    // For the status line and `tmcra-mcp memory last-recall`: what the newest prompt was given.
    tools::RecordRecall(**outbox, LastRecallNote(in, blocks, *given, envelope, deps));
  }
  answer.output = ContextOutput(in.host, event, envelope.text);
  answer.session = session;
  answer.given = std::move(envelope.keys);
  answer.given.insert(answer.given.end(), held.begin(), held.end());
  return answer;
}

// Works on the outbox's unfinished writes until they are done or the deadline comes.
void DeliverPending(HookDeps& deps) {
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return;
  const auto deadline = deps.options.deadline;
  const auto cancelled = [deadline] { return Clock::now() >= deadline; };
  // A submitted write's job may still be running: it is polled again shortly, a few times.
  int idle_passes = 0;
  for (int pass = 0; pass < 20 && idle_passes < 3 && !cancelled(); ++pass) {
    auto open = (*outbox)->InStates({queue::kPending, queue::kSubmitted}, 100);
    if (!open || open->empty()) return;
    // Due only: a write backing off after a failure is not retried by every hook.
    auto changed = deps.tools.delivery->DeliverBatch(*open, cancelled, /*due_only=*/true);
    if (!changed) return;
    if (*changed == 0) {
      ++idle_passes;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// Commits the prepared turn `turn_id` with `answer` (none: the user message alone).
Status CommitPrepared(const std::string& turn_id, const std::optional<std::string>& answer,
                      HookDeps& deps) {
  json args{{"turn_id", turn_id}, {"consistency", "eventual"}};
  const bool user_only = !answer || Trim(*answer).empty();
  if (!user_only) {
    if (CodePointLength(*answer) > kMaxMessageChars) {
      return Error::Invalid("the answer is over 200000 characters; it is not stored");
    }
    args["assistant_message_id"] = turn_id + ":assistant";
    args["assistant_content"] = *answer;
  }
  HookToolContext ctx(deps.options.deadline);
  auto committed = Structured(tools::CommitTurn(args, ctx, deps.tools, user_only));
  if (!committed) return committed.error();
  TMCRA_FAILPOINT("hook.commit.after_commit");
  return Ok();
}

// A brief of the project's recent work: the newest prompts this machine's hooks stored in its
// scope (each clipped), one block, in the evidence format so the envelope takes it as memory.
std::vector<MemoryBlock> BriefBlocks(queue::Outbox& outbox, const HookDeps& deps) {
  auto recent = outbox.RecentTurns(deps.options.store_scope, 8);
  if (!recent || recent->empty()) return {};
  std::string text = "[Recent requests in this project | newest first | actor=user]";
  for (const auto& turn : *recent) {
    std::string line = turn.user_content.size() > 200
                           ? SanitizeUtf8(turn.user_content.substr(0, 200)) + " ..."
                           : turn.user_content;
    for (char& c : line) {
      if (c == '\n') c = ' ';
    }
    text += "\n- " + turn.user_timestamp.substr(0, 10) + ": " + line;
  }
  MemoryBlock block;
  block.key = "brief:" + Sha256Hex(text);
  block.text = std::move(text);
  return {block};
}

bool MayRead(const HookDeps& deps, const std::string& scope, const std::string& session) {
  if (deps.tools.controls == nullptr) return true;
  auto controls = deps.tools.controls->ForRecall(deps.tools.control_key(scope), session, "");
  return controls && controls->policy.read;
}

// ---- the events ---------------------------------------------------------------------------

Result<HookAnswer> OnSessionStart(const HookInput& in, HookDeps& deps) {
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  const std::string session = MemorySession(in);
  // After a compaction or a clear, the memory given before is no longer in the model's context.
  // A resumed Codex request was seen without the hook context given before: the transcript
  // alone then says what the model has.
  if (in.source == "compact" || in.source == "clear" ||
      (in.host == Host::kCodex && in.source == "resume")) {
    if (auto s = (*outbox)->ForgetInjectedBlocks(session); !s) return s.error();
  }
  HookAnswer answer;
  // Gemini CLI puts a SessionStart context before the user's prompt under -p, and a resumed
  // session then drops that whole message: it is given none.
  if (deps.options.session_brief && in.host != Host::kGeminiCli &&
      MayRead(deps, deps.options.store_scope, session)) {
    answer = GiveBlocks(in, BriefBlocks(**outbox, deps), session, deps);
  }
  DeliverPending(deps);
  return answer;
}

// Binds `turn_id`, the session's user turn with `prompt`, without a recall. False when memory is
// off for it: nothing of it is to be stored.
Result<bool> BindTurn(const std::string& turn_id, const std::string& prompt,
                      const std::string& session, HookDeps& deps) {
  const json args{{"turn_id", turn_id},
                  {"session_id", session},
                  {"user_message_id", turn_id + ":user"},
                  {"user_content", prompt},
                  {"scope", deps.options.store_scope}};
  auto bound = Structured(tools::PrepareTurn(args, deps.tools, /*recall=*/false));
  if (!bound) return bound.error();
  return bound->value("status", "") != "disabled";
}

// Whether the hooks store `prompt` (trimmed): not an empty one nor a slash command (the host's,
// not a message to the model). An error for one over the size limit.
Result<bool> StorablePrompt(const std::string& prompt) {
  if (prompt.empty() || prompt.front() == '/') return false;
  if (CodePointLength(prompt) > kMaxMessageChars) {
    return Error::Invalid("hook input.prompt: over 200000 characters; not stored");
  }
  return true;
}

// The turn is bound first (so its answer is stored whatever happens to the recall), then memory
// is recalled with the filtered prompt from every recall scope.
Result<HookAnswer> OnPrompt(const HookInput& in, HookDeps& deps) {
  const std::string prompt = Trim(in.prompt);
  auto storable = StorablePrompt(prompt);
  if (!storable) return storable.error();
  if (!*storable) return HookAnswer{};
  const std::string session = MemorySession(in);
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  std::string turn_id = HostTurnId(in);
  if (turn_id.empty()) {
    auto turns = (*outbox)->GetSessionTurns(session);
    if (!turns) return turns.error();
    turn_id = DerivedTurnId(session, prompt, turns->count + 1);
  }
  auto bound = BindTurn(turn_id, prompt, session, deps);
  if (!bound) return bound.error();
  const std::string query = Filtered(deps, prompt);
  if (!*bound) {
    (void)(*outbox)->AddInjectedBlocks(session, {SkipMark(query)});
    return HookAnswer{};
  }
  TMCRA_FAILPOINT("hook.prepare.after_bind");
  if (query.empty() || IsTrivialPrompt(query, deps.options.min_prompt_chars)) return HookAnswer{};
  return GiveBlocks(in, RecallAllScopes(deps, session, query), session, deps);
}

// The prompt of the turn a Stop ends, filtered: the payload's, when it carries one, else the
// transcript's last; nullopt when neither says.
std::optional<std::string> StopPrompt(const HookInput& in, const HookDeps& deps) {
  if (!Trim(in.prompt).empty()) return Filtered(deps, Trim(in.prompt));
  if (in.transcript_path.empty()) return std::nullopt;
  auto turns = ReadTranscript(in.host, in.transcript_path);
  if (!turns || turns->empty()) return std::nullopt;
  return Filtered(deps, Trim(turns->back().user));
}

// The prepared turn a Stop (or a failure) ends, or none:
// - the host named the turn: that turn, if the hooks bound it in this session (another turn's
//   answer must never be taken for it);
// - else the session's newest turn, if the Stop's prompt is its prompt (when the payload or a
//   transcript says).
// Nothing when that turn is committed already.
Result<std::optional<queue::PreparedTurn>> OpenTurn(const HookInput& in, HookDeps& deps) {
  using Found = std::optional<queue::PreparedTurn>;
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  std::string turn_id = HostTurnId(in);
  const bool named = !turn_id.empty();
  if (!named) {
    auto turns = (*outbox)->GetSessionTurns(MemorySession(in));
    if (!turns) return turns.error();
    if (!turns->latest_turn_id) return Found();
    turn_id = *turns->latest_turn_id;
  }
  auto turn = (*outbox)->GetTurn(turn_id);
  if (!turn) return turn.error();
  if (!*turn || (*turn)->state == "committed" || (*turn)->session_id != MemorySession(in)) {
    return Found();
  }
  if (!named) {
    auto last = StopPrompt(in, deps);
    if (last && *last != (*turn)->user_content) return Found();
  }
  return turn;
}

// The answer the payload carries (last_assistant_message), or nullopt when it carries none.
std::optional<std::string> PayloadAnswer(const HookInput& in) {
  if (in.last_assistant_message && !Trim(*in.last_assistant_message).empty()) {
    return in.last_assistant_message;
  }
  return std::nullopt;
}

// The answer of `turn`, which a Stop ends: the payload's, else the transcript's last answer when
// the transcript's last turn is that turn (its prompt is the turn's): an answer written for
// another turn is never taken for it.
std::optional<std::string> StopAnswer(const HookInput& in, const queue::PreparedTurn& turn,
                                      const HookDeps& deps) {
  if (auto answer = PayloadAnswer(in)) return answer;
  if (in.transcript_path.empty()) return std::nullopt;
  auto turns = ReadTranscript(in.host, in.transcript_path);
  if (!turns || turns->empty() || turns->back().assistant.empty()) return std::nullopt;
  if (Filtered(deps, Trim(turns->back().user)) != turn.user_content) return std::nullopt;
  return turns->back().assistant;
}

// A subagent's final message: the payload's, else the last answer of its own transcript.
std::optional<std::string> SubagentAnswer(const HookInput& in) {
  if (auto answer = PayloadAnswer(in)) return answer;
  if (in.agent_transcript_path.empty()) return std::nullopt;
  auto turns = ReadTranscript(in.host, in.agent_transcript_path, /*subagent=*/true);
  if (!turns || turns->empty() || turns->back().assistant.empty()) return std::nullopt;
  return turns->back().assistant;
}

// Binds a transcript turn the hooks never saw in this session, under an id from its prompt and
// answer alone. Returns the id, or empty when nothing is to be stored: memory was off for it, or
// a committed turn of the scope has its prompt (a resumed or forked conversation carries the
// turns of the session it continues, under a new session id).
Result<std::string> BindTranscriptTurn(const std::string& prompt, const std::string& answer,
                                       const std::set<std::string>& marks, HookDeps& deps,
                                       const std::string& session) {
  const std::string filtered = Filtered(deps, prompt);
  if (marks.count(SkipMark(filtered)) != 0) return std::string();
  const std::string turn_id =
      "auto-" +
      Sha256Hex("transcript" + std::string(1, '\0') + prompt + '\0' + answer).substr(0, 32);
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  auto existing = (*outbox)->GetTurn(turn_id);
  if (!existing) return existing.error();
  if (*existing) return (*existing)->state == "committed" ? std::string() : turn_id;
  auto stored = (*outbox)->HasCommittedPrompt(deps.options.store_scope, filtered);
  if (!stored) return stored.error();
  if (*stored) return std::string();
  auto bound = BindTurn(turn_id, prompt, session, deps);
  if (!bound) return bound.error();
  return *bound ? turn_id : std::string();
}

// The transcript's answered turns not stored yet are stored. The k-th turn of a prompt text is
// the session's k-th bound turn of that (filtered) text: one committed is left alone, one still
// prepared is committed with the transcript's answer, one never bound is bound and committed.
// `include_last`: the last turn too (a Stop's, whose answer is known); else it may still be
// running and is left to its own Stop. A turn that cannot be stored is logged and skipped.
Status StoreUnstoredTurns(const HookInput& in, const std::vector<TranscriptTurn>& turns,
                          bool include_last, HookDeps& deps) {
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  const std::string session = MemorySession(in);
  auto prepared = (*outbox)->ListSessionTurns(session);
  if (!prepared) return prepared.error();
  auto marks = (*outbox)->InjectedBlocks(session);
  if (!marks) return marks.error();
  std::map<std::string, std::vector<const queue::PreparedTurn*>> by_text;
  for (const auto& t : *prepared) by_text[t.user_content].push_back(&t);
  std::map<std::string, size_t> seen;
  const size_t end = include_last ? turns.size() : turns.size() - std::min<size_t>(turns.size(), 1);
  for (size_t i = 0; i < end && Clock::now() < deps.options.deadline; ++i) {
    const std::string prompt = Trim(turns[i].user);
    if (prompt.empty() || prompt.front() == '/' || CodePointLength(prompt) > kMaxMessageChars) {
      continue;
    }
    const std::string filtered = Filtered(deps, prompt);
    const size_t occurrence = seen[filtered]++;
    if (turns[i].assistant.empty()) continue;
    const auto& same = by_text[filtered];
    Result<std::string> turn_id = std::string();
    if (occurrence < same.size()) {
      if (same[occurrence]->state == "committed") continue;
      turn_id = same[occurrence]->turn_id;
    } else {
      turn_id = BindTranscriptTurn(prompt, turns[i].assistant, *marks, deps, session);
    }
    Status stored =
        turn_id ? (turn_id->empty() ? Ok() : CommitPrepared(*turn_id, turns[i].assistant, deps))
                : Status(turn_id.error());
    if (!stored)
      spdlog::warn("hook: transcript turn {} not stored: {}", i + 1, stored.error().message);
  }
  return Ok();
}

// A Stop with no open turn: its prompt's hook may have died before binding it. The transcript
// says; its last turn is this Stop's, with this Stop's answer.
Status StoreMissedTurn(const HookInput& in, HookDeps& deps) {
  if (in.transcript_path.empty()) return Ok();
  auto turns = ReadTranscript(in.host, in.transcript_path);
  if (!turns || turns->empty()) return Ok();
  if (auto answer = PayloadAnswer(in)) turns->back().assistant = std::move(*answer);
  return StoreUnstoredTurns(in, *turns, /*include_last=*/true, deps);
}

// Claude Code's and Codex's Stop: the open turn is committed, else the transcript says which
// turn this was.
Status StoreStoppedTurn(const HookInput& in, HookDeps& deps) {
  auto turn = OpenTurn(in, deps);
  if (!turn) return turn.error();
  if (*turn) return CommitPrepared((*turn)->turn_id, StopAnswer(in, **turn, deps), deps);
  return StoreMissedTurn(in, deps);
}

// Whether a commit was refused because the turn is committed with another answer.
bool IsOtherAnswer(const Error& error) {
  return error.message.find("already has a committed answer") != std::string::npos;
}

// Gemini CLI's AfterAgent names no turn, only its prompt, and its prompt_response is the turn's
// whole answer (none for "[no response text]": the prompt is then stored alone); the transcript
// is not read. The turn is sought among the session's turns of that prompt, newest first:
// - one not committed yet (BeforeAgent bound it) is committed with the answer;
// - one committed with this same answer is this turn, stored already (the event delivered
//   twice, or run by two installed hooks): nothing more is written;
// - with neither, BeforeAgent never bound it: it is bound now under the id BeforeAgent would
//   have given it (DerivedTurnId of the session, the prompt and the session's turns + 1), and
//   committed. Copies of the event running at once derive the same id (the outbox keeps one
//   turn per id), and a later copy finds the turn committed with its answer.
// So a turn answered word for word as an earlier turn of its prompt in the session is taken for
// that turn, whose text is stored already. Unlike a transcript's turns, another session's
// stored turn of the same prompt does not count: a resumed Gemini CLI session keeps its id.
Status StoreGeminiTurn(const HookInput& in, HookDeps& deps) {
  const std::string prompt = Trim(in.prompt);
  auto storable = StorablePrompt(prompt);
  if (!storable) return storable.error();
  if (!*storable) return Ok();
  const std::string session = MemorySession(in);
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  auto turns = (*outbox)->ListSessionTurns(session);
  if (!turns) return turns.error();
  const std::string filtered = Filtered(deps, prompt);
  for (auto t = turns->rbegin(); t != turns->rend(); ++t) {
    if (t->user_content != filtered) continue;
    Status committed = CommitPrepared(t->turn_id, in.last_assistant_message, deps);
    if (committed || !IsOtherAnswer(committed.error())) return committed;
  }
  auto marks = (*outbox)->InjectedBlocks(session);
  if (!marks) return marks.error();
  if (marks->count(SkipMark(filtered)) != 0) return Ok();  // memory was off for this prompt
  const std::string turn_id =
      DerivedTurnId(session, prompt, static_cast<int64_t>(turns->size()) + 1);
  auto bound = BindTurn(turn_id, prompt, session, deps);
  if (!bound) return bound.error();
  return *bound ? CommitPrepared(turn_id, in.last_assistant_message, deps) : Ok();
}

Result<HookAnswer> OnStop(const HookInput& in, HookDeps& deps) {
  if (in.stop_hook_active) return HookAnswer{};  // a Stop hook's own continuation
  Status stored =
      in.host == Host::kGeminiCli ? StoreGeminiTurn(in, deps) : StoreStoppedTurn(in, deps);
  if (!stored) return stored.error();
  DeliverPending(deps);
  return HookAnswer{};
}

// A turn that failed or was interrupted: its user message is stored, no answer is invented.
Result<HookAnswer> OnTurnEndedWithoutAnswer(const HookInput& in, HookDeps& deps) {
  auto turn = OpenTurn(in, deps);
  if (!turn) return turn.error();
  if (*turn) {
    if (auto s = CommitPrepared((*turn)->turn_id, std::nullopt, deps); !s) return s.error();
  }
  DeliverPending(deps);
  return HookAnswer{};
}

// A subagent's final message, as the agent's: its prompt was the parent model's, not the user's.
Result<HookAnswer> OnSubagentStop(const HookInput& in, HookDeps& deps) {
  if (in.stop_hook_active || in.agent_id.empty()) return HookAnswer{};
  const auto answer = SubagentAnswer(in);
  if (!answer || CodePointLength(*answer) > kMaxMessageChars) return HookAnswer{};
  const std::string session = MemorySession(in);
  const std::string agent = in.agent_type.empty() ? in.agent_id : in.agent_type;
  json message{{"message_id", "subagent:" + Sha256Hex(in.agent_id).substr(0, 24) + ":final"},
               {"role", "assistant"},
               {"content", *answer}};
  json args{
      {"session_id", session},
      {"messages", json::array({message})},
      {"scope", deps.options.store_scope},
      {"idempotency_key",
       "hook-subagent-" + Sha256Hex(session + '\0' + in.agent_id + '\0' + *answer).substr(0, 40)}};
  if (IsValidAgentId(agent)) args["agent_id"] = agent;
  auto stored = Ingested(tools::IngestMessages(args, deps.tools));
  if (!stored) return stored.error();
  DeliverPending(deps);
  return HookAnswer{};
}

// Before the host compacts the transcript away, its answered turns not stored yet are stored.
Result<HookAnswer> OnPreCompact(const HookInput& in, HookDeps& deps) {
  if (in.transcript_path.empty()) return HookAnswer{};
  auto turns = ReadTranscript(in.host, in.transcript_path);
  if (!turns) return turns.error();
  if (auto s = StoreUnstoredTurns(in, *turns, /*include_last=*/false, deps); !s) return s.error();
  DeliverPending(deps);
  return HookAnswer{};
}

// The first `max` bytes of `text`, cut at a character boundary.
std::string Clip(std::string text, size_t max) {
  if (text.size() <= max) return text;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + " ...";
}

// A compact observation of one tool call, as its own role: filtered first, then clipped, so a
// secret is never cut to a piece the filter no longer knows.
Result<HookAnswer> OnPostToolUse(const HookInput& in, HookDeps& deps) {
  if (!deps.options.observe_tools || in.tool_name.empty()) return HookAnswer{};
  const auto text = [](const json& value) {
    return value.is_string() ? value.get<std::string>()
                             : value.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  const std::string content = "Tool " + in.tool_name +
                              "\ninput: " + Clip(Filtered(deps, text(in.tool_input)), 400) +
                              "\nresult: " + Clip(Filtered(deps, text(in.tool_response)), 800);
  const std::string session = MemorySession(in);
  // One call: the host's id for it, else its text and when the host fired the event (Gemini
  // CLI's timestamp), so two identical calls of a session are two observations.
  std::string call = in.tool_use_id;
  if (call.empty()) call = in.timestamp.empty() ? content : content + '\0' + in.timestamp;
  const std::string key = "hook-tool-" + Sha256Hex(session + '\0' + call).substr(0, 40);
  json message{
      {"message_id", "tool:" + key.substr(10, 24)}, {"role", "tool"}, {"content", content}};
  json args{{"session_id", session},
            {"messages", json::array({message})},
            {"scope", deps.options.store_scope},
            {"idempotency_key", key}};
  auto stored = Ingested(tools::IngestMessages(args, deps.tools));
  if (!stored) return stored.error();
  return HookAnswer{};
}

Result<HookAnswer> OnSessionEnd(const HookInput& in, HookDeps& deps) {
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  if (auto s = (*outbox)->ForgetInjectedBlocks(MemorySession(in)); !s) return s.error();
  DeliverPending(deps);
  return HookAnswer{};
}

Result<HookAnswer> OnPostCompact(const HookInput& in, HookDeps& deps) {
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return outbox.error();
  if (auto s = (*outbox)->ForgetInjectedBlocks(MemorySession(in)); !s) return s.error();
  return HookAnswer{};
}

}  // namespace

std::string DerivedTurnId(const std::string& session_id, const std::string& prompt,
                          int64_t ordinal) {
  return "auto-" +
         Sha256Hex(session_id + '\0' + prompt + '\0' + std::to_string(ordinal)).substr(0, 32);
}

Result<HookAnswer> RunHook(const HookInput& in, HookDeps& deps) {
  switch (in.event) {
    case Event::kSessionStart:
      return OnSessionStart(in, deps);
    case Event::kUserPromptSubmit:
      return OnPrompt(in, deps);
    case Event::kStop:
      return OnStop(in, deps);
    case Event::kStopFailure:
    case Event::kInterrupt:
      return OnTurnEndedWithoutAnswer(in, deps);
    case Event::kSubagentStop:
      return OnSubagentStop(in, deps);
    case Event::kPreCompact:
      return OnPreCompact(in, deps);
    case Event::kPostCompact:
      return OnPostCompact(in, deps);
    case Event::kSessionEnd:
      return OnSessionEnd(in, deps);
    case Event::kPostToolUse:
      return OnPostToolUse(in, deps);
    case Event::kSubagentStart:
      return HookAnswer{};  // the subagent's prompt is the parent model's: nothing to store
  }
  return HookAnswer{};
}

void RecordGiven(const HookAnswer& answer, HookDeps& deps) {
  if (answer.given.empty()) return;
  auto outbox = deps.tools.delivery->outbox();
  if (!outbox) return;
  if (auto s = (*outbox)->AddInjectedBlocks(answer.session, answer.given); !s) {
    spdlog::warn("hook: could not remember the memory given: {}", s.error().message);
  }
}

}  // namespace tmcra::hooks
