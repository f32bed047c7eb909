// The durable turn lifecycle (docs/contract.md §2.4, §2.5, §4.3.5-§4.3.7): tmcra_turn_prepare
// recalls before the host answers and binds the real user turn; tmcra_turn_commit writes the
// exact user/assistant turn through the outbox; tmcra_reconcile finishes (or replays) what the
// outbox still holds. docs/compatibility.md lists where this differs from TMCRA and why.
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/failpoint.h"
#include "base/identifiers.h"
#include "base/utf8.h"
#include "receipts/receipts.h"
#include "src/tools/ingest_body.h"
#include "src/tools/memory_tools.h"
#include "src/tools/tool_support.h"

namespace tmcra::tools {

namespace {

using json = nlohmann::json;
using mcp::ToolResult;

constexpr const char* kLifecycleSchema = "tmcra.mcp.lifecycle-turn-receipt.v1";
constexpr const char* kReconcileSchema = "tmcra.mcp.reconciliation-receipt.v1";

bool IsTerminal(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

// The queue's row receipt (§2.4, _row_receipt), with the fill-ins of §2.5. `compact` (for
// reconcile, which lists many items) gives the stored recall as a reference instead of the
// whole evidence, so the answer stays far below the 10 MiB stdio clients accept.
// `recall`: the turn's recall receipt when the caller has it; else the item's, whole or, with
// `compact`, reduced to a reference.
json RowReceipt(const queue::Item& item, bool compact = false,
                std::optional<json> recall_override = std::nullopt) {
  const json ingest = item.receipt.is_object() ? item.receipt : json::object();
  json recall;
  if (recall_override) {
    recall = std::move(*recall_override);
  } else if (compact && item.recall_receipt.is_object()) {
    recall = json::object();
    for (const char* key : {"query_id", "scope_name", "evidence_sha256"}) {
      if (item.recall_receipt.contains(key)) recall[key] = item.recall_receipt[key];
    }
  } else {
    recall = item.recall_receipt;
  }
  json r{{"schema_version", kLifecycleSchema},
         {"contract_schema_version", receipts::kContractSchemaVersion},
         {"receipt_type", "lifecycle_turn"},
         {"status", item.state},
         {"item_id", item.item_id},
         {"ingest", ingest},
         {"recall", std::move(recall)},
         {"error", item.last_error ? json(*item.last_error) : json(nullptr)},
         {"attempts", item.attempts}};
  r["submitted_status"] = "submitted";
  r["observed_status"] = item.state;
  r["final_status"] = IsTerminal(item.state) ? json(item.state) : json(nullptr);
  r["submitted"] = true;
  r["final"] = IsTerminal(item.state);
  r["watermarks"] = json::object();
  return r;
}

// _lifecycle_projection (§2.4) of a committed turn's row receipt.
// `item` may be read for delivery (its recall receipt reduced): the turn's `recall` is used.
json Projection(const queue::Item& item, const std::string& turn_id, json recall) {
  json r = RowReceipt(item, /*compact=*/false, std::move(recall));
  const json& ingest = r["ingest"];
  std::string observed = item.state;
  if (ingest.is_object() && ingest.contains("status") && ingest["status"].is_string()) {
    observed = ingest["status"];
  }
  r["turn_id"] = turn_id;
  r["observed_status"] = observed;
  r["final_status"] = IsTerminal(observed) ? json(observed) : json(nullptr);
  r["final"] = IsTerminal(observed);
  r["watermarks"] =
      ingest.is_object() && ingest.contains("watermarks") ? ingest["watermarks"] : json::object();
  return r;
}

Result<json> Counts(queue::Outbox& outbox) {
  auto counts = outbox.GetCounts();
  if (!counts) return counts.error();
  return counts->StatesJson();
}

// ---- tmcra_turn_prepare ------------------------------------------------------------------

json PrepareSchema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"turn_id", {{"type", "string"}, {"minLength", 1}, {"maxLength", kMaxIdChars}}},
        {"session_id", {{"type", "string"}, {"minLength", 1}, {"maxLength", kMaxIdChars}}},
        {"user_message_id", {{"type", "string"}, {"minLength", 1}, {"maxLength", kMaxIdChars}}},
        {"user_content", {{"type", "string"}, {"minLength", 1}, {"maxLength", 200000}}},
        {"scope", NullableString(128)},
        {"evidence_mode",
         {{"type", "string"}, {"enum", {"raw", "auto", "compiled"}}, {"default", "auto"}}},
        {"agent_id", NullableString(200)}}},
      {"required", {"turn_id", "session_id", "user_message_id", "user_content"}},
      {"additionalProperties", false}};
}

// Binds the user turn `turn_id` durably in the outbox, with the recall it was given.
Status BindUserTurn(queue::Outbox& outbox, const std::string& turn_id, const std::string& scope,
                    const std::string& session, const std::string& message_id,
                    const std::string& content, const json& recall) {
  queue::PreparedTurn turn;
  turn.turn_id = turn_id;
  turn.scope_name = scope;
  turn.session_id = session;
  turn.user_message_id = message_id;
  turn.user_content = content;
  turn.user_timestamp = FormatIsoUtc(NowSeconds());
  turn.recall_receipt = recall;
  return outbox.PrepareTurn(turn);
}

// A replay of a bound user turn: the same turn again gets its stored recall, validated again,
// and no new recall; another user turn under the same id is a conflict. A turn already stored
// keeps no recalled memory (its receipt was pruned), so a replay then injects nothing.
Result<json> ReplayedRecall(const queue::PreparedTurn& t, const std::string& scope,
                            const std::string& session, const std::string& message_id,
                            const std::string& content) {
  if (t.scope_name != scope || t.session_id != session || t.user_message_id != message_id ||
      t.user_content != content) {
    return Error::Conflict("turn_id is already bound to a different user turn");
  }
  json stored = t.recall_receipt;
  if (stored.is_object()) stored.erase("_local_capture");
  const bool pruned = stored.is_object() && stored.value("pruned", false);
  if (!t.user_content.empty() && !pruned) {
    TMCRA_RETURN_IF_ERROR(receipts::RecallReceipt(stored, scope));
  }
  json recall = t.recall_receipt;
  if (pruned) recall["injectable_context"] = {{"content", ""}};
  return recall;
}

// tmcra_turn_prepare's answer: a lifecycle receipt, or only the recall when the memory
// controls allow reading but not writing.
ToolResult PreparedAnswer(bool write_allowed, const std::string& turn_id, const std::string& scope,
                          json recall, const Filtering& filtering) {
  if (!write_allowed) {
    return ToolResult::Ok({{"status", "recall_only"},
                           {"turn_id", turn_id},
                           {"write_allowed", false},
                           {"injectable_context", recall["injectable_context"]},
                           {"task_handoff", recall.value("task_handoff", json(nullptr))},
                           {"trust_boundary", "untrusted_memory_data"},
                           {"content_filter", filtering.ToJson()}});
  }
  return ToolResult::Ok({{"schema_version", kLifecycleSchema},
                         {"content_filter", filtering.ToJson()},
                         {"contract_schema_version", receipts::kContractSchemaVersion},
                         {"receipt_type", "lifecycle_turn"},
                         {"status", "prepared"},
                         {"submitted_status", "submitted"},
                         {"final_status", nullptr},
                         {"submitted", true},
                         {"final", false},
                         {"watermarks", recall.value("watermarks", json::object())},
                         {"turn_id", turn_id},
                         {"scope_name", scope},
                         {"recall", recall},
                         {"injectable_context", recall["injectable_context"]},
                         {"trust_boundary", "untrusted_memory_data"}});
}

// For `tmcra-mcp memory last-recall`: what a prepared turn was given (its query, the memory
// ids its context names, its bytes and the selection the budget made). Best effort: a status
// note, not part of the turn.
void NoteLastRecall(queue::Outbox& outbox, const std::string& session, const std::string& query,
                    const json& recall) {
  const std::string context =
      recall.value("injectable_context", json::object()).value("content", "");
  json ids = json::array();
  constexpr std::string_view kId = "memory_id=";
  for (size_t at = context.find(kId); at != std::string::npos; at = context.find(kId, at)) {
    at += kId.size();
    const size_t end = context.find_first_of(" ]|\n", at);
    ids.push_back(context.substr(at, end == std::string::npos ? std::string::npos : end - at));
  }
  const auto given = static_cast<int64_t>(ids.size());
  RecordRecall(outbox, {{"at", FormatIsoUtc(NowSeconds())},
                        {"by", "tmcra_turn_prepare"},
                        {"session", session},
                        {"query", query},
                        {"query_id", recall.value("query_id", json())},
                        {"given_blocks", given},
                        {"recalled_blocks", given},
                        {"given", std::move(ids)},
                        {"bytes", context.size()},
                        {"selection", recall.value("selection", json())}});
}

ToolResult Prepare(const json& args, const MemoryToolDeps& deps, bool recall_memory) {
  const char* kTool = "tmcra_turn_prepare";
  auto resolved = Resolve(args, deps.default_scope, deps.default_agent_id);
  if (!resolved) return Failure(kTool, resolved.error());
  const std::string turn_id = Trim(args["turn_id"].get<std::string>());
  const std::string session = Trim(args["session_id"].get<std::string>());
  const std::string message_id = Trim(args["user_message_id"].get<std::string>());
  const std::string raw_content = Trim(args["user_content"].get<std::string>());
  for (const auto& [name, value] : {std::pair{"turn_id", turn_id},
                                    {"session_id", session},
                                    {"user_message_id", message_id},
                                    {"user_content", raw_content}}) {
    if (value.empty())
      return Failure(kTool,
                     Error::Invalid(std::string("arguments.") + name + ": must not be blank"));
  }
  // Filtered before anything is recalled or stored; a message that was all private is
  // neither (its turn's answer still is).
  Filtering filtering;
  const std::string content = FilterText(deps.filter, raw_content, filtering);
  if (deps.filter_tally != nullptr) deps.filter_tally->Add(filtering);
  controls::Policy capture;
  capture.session_id = session;
  // The turn's recall takes its task hand-off and budget from the state BeginTurn read.
  std::optional<controls::RecallControls> read_controls;
  if (deps.controls != nullptr) {
    capture.key = deps.control_key(resolved->scope);
    auto begun = deps.controls->BeginTurnForRecall(capture.key, session, turn_id, content);
    if (!begun) return Failure(kTool, begun.error());
    capture = begun->policy;
    read_controls = std::move(*begun);
  }
  if (!capture.read) {
    return ToolResult::Ok({{"status", "disabled"},
                           {"turn_id", turn_id},
                           {"write_allowed", false},
                           {"injectable_context", {{"content", ""}}}});
  }
  auto outbox = deps.delivery->outbox();
  if (!outbox) return Failure(kTool, outbox.error());
  auto existing = (*outbox)->GetTurn(turn_id);
  if (!existing) return Failure(kTool, existing.error());
  json recall;
  if (*existing) {
    auto replayed = ReplayedRecall(**existing, resolved->scope, session, message_id, content);
    if (!replayed) return Failure(kTool, replayed.error());
    recall = std::move(*replayed);
  } else if (content.empty() || !recall_memory) {
    // Nothing to recall with (the whole message was private), or no recall wanted.
    recall = {{"injectable_context", {{"content", ""}}}, {"_local_capture", capture.ToJson()}};
    if (auto s =
            BindUserTurn(**outbox, turn_id, resolved->scope, session, message_id, content, recall);
        !s) {
      return Failure(kTool, s.error());
    }
  } else {
    RecallRequest request;
    request.scope = resolved->scope;
    request.agent_id = resolved->agent_id;
    request.session_id = session;
    request.query = content;
    request.evidence_mode = args.value("evidence_mode", "auto");
    request.read_controls = std::move(read_controls);
    auto fresh = RecallForTool(deps, request);
    if (!fresh) return Failure(kTool, fresh.error());
    recall = std::move(*fresh);
    recall["_local_capture"] = capture.ToJson();
    NoteLastRecall(**outbox, session, content, recall);
    TMCRA_FAILPOINT("prepare.after_recall_before_persist");
    // Persisted even when writing is not allowed (TMCRA persists nothing then, so the host's
    // later commit fails with "turn_id is unknown"); the commit then reports a skip instead.
    if (auto s =
            BindUserTurn(**outbox, turn_id, resolved->scope, session, message_id, content, recall);
        !s) {
      return Failure(kTool, s.error());
    }
  }
  return PreparedAnswer(capture.write, turn_id, resolved->scope, std::move(recall), filtering);
}

// ---- tmcra_turn_commit -------------------------------------------------------------------

json CommitSchema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"turn_id", {{"type", "string"}, {"minLength", 1}, {"maxLength", kMaxIdChars}}},
        {"assistant_message_id",
         {{"type", "string"}, {"minLength", 1}, {"maxLength", kMaxIdChars}}},
        {"assistant_content", {{"type", "string"}, {"minLength", 1}, {"maxLength", 200000}}},
        {"assistant_timestamp",
         {{"anyOf",
           json::array({{{"type", "string"}, {"format", "date-time"}}, {{"type", "null"}}})},
          {"default", nullptr}}},
        {"consistency",
         {{"type", "string"},
          {"enum", {"eventual", "read_your_writes"}},
          {"default", "read_your_writes"}}},
        {"slow_policy",
         {{"type", "string"}, {"enum", {"auto", "deferred", "force"}}, {"default", "auto"}}},
        {"idempotency_key",
         {{"anyOf", json::array({{{"type", "string"}, {"minLength", 8}, {"maxLength", 200}},
                                 {{"type", "null"}}})},
          {"default", nullptr}}},
        {"agent_id", NullableString(200)}}},
      {"required", {"turn_id", "assistant_message_id", "assistant_content"}},
      {"additionalProperties", false}};
}

// The answer of a turn as tmcra_turn_commit was given it, checked: blank fields and a timestamp
// that is not ISO-8601 are refused, naming the argument. `user_only` (a turn that ended
// without an answer) reads the turn id alone.
struct CommitArguments {
  std::string turn_id;
  std::string message_id;
  std::string raw_content;
  std::string timestamp;  // normalised, or now
};

Result<CommitArguments> ReadCommitArguments(const json& args, bool user_only) {
  CommitArguments in;
  in.turn_id = Trim(args["turn_id"].get<std::string>());
  if (!user_only) {
    in.message_id = Trim(args["assistant_message_id"].get<std::string>());
    in.raw_content = Trim(args["assistant_content"].get<std::string>());
  }
  for (const auto& [name, value] : {std::pair{"turn_id", in.turn_id},
                                    {"assistant_message_id", in.message_id},
                                    {"assistant_content", in.raw_content}}) {
    if (value.empty() && (!user_only || std::string_view(name) == "turn_id")) {
      return Error::Invalid(std::string("arguments.") + name + ": must not be blank");
    }
  }
  in.timestamp = FormatIsoUtc(NowSeconds());
  if (auto ts = OptionalArg(args, "assistant_timestamp"); !ts.empty()) {
    auto normalised = PydanticTimestamp(ts);
    if (!normalised) {
      return Error::Invalid("arguments.assistant_timestamp: is not an ISO-8601 date-time");
    }
    in.timestamp = *normalised;
  }
  return in;
}

// The commit's idempotency key: the caller's, or derived from TMCRA's documented body, so keys
// stay stable across builds. A turn that ended without an answer is keyed without one.
std::string CommitKey(const json& args, const CommitArguments& in, const std::string& content,
                      const queue::PreparedTurn& t, const Resolved& resolved,
                      const std::string& consistency, const std::string& slow_policy,
                      bool user_only) {
  std::string key = OptionalArg(args, "idempotency_key");
  if (!key.empty()) return key;
  const json assistant_dump =
      user_only ? json(nullptr)
                : json{{"message_id", in.message_id},
                       {"role", "assistant"},
                       {"content", content},
                       {"timestamp", in.timestamp},
                       {"agent_id", resolved.agent_id ? json(*resolved.agent_id) : json(nullptr)},
                       {"target_agent_id", nullptr}};
  return DeriveIdempotencyKey(t.scope_name, {{"turn_id", in.turn_id},
                                             {"assistant", assistant_dump},
                                             {"consistency", consistency},
                                             {"slow_policy", slow_policy}});
}

// The turn's messages and metadata as the outbox stores them. On the wire both messages carry
// per-message metadata exactly as tmcra_ingest sends it (TMCRA sends agent_id/target_agent_id
// keys the service rejects; see compatibility.md). A message the filter left empty (all of it
// private) is not stored, and is counted as dropped; the other one is.
void AddCommitMessages(const CommitArguments& in, const std::string& content,
                       const queue::PreparedTurn& t, const Resolved& resolved,
                       const MemoryToolDeps& deps, bool user_only, Filtering& filtering,
                       queue::CommitRequest& request) {
  json user_meta{{"actor_role", "user"}};
  json assistant_meta{{"actor_role", "assistant"}};
  if (resolved.agent_id) {
    user_meta["target_agent_id"] = *resolved.agent_id;
    assistant_meta["agent_id"] = *resolved.agent_id;
  }
  request.metadata = json{
      {"integration", "mcp"}, {"integration_version", deps.version}, {"scope_sharing", "shared"}};
  if (resolved.agent_id) {
    request.metadata["agent_id"] = *resolved.agent_id;
    request.metadata["agent_id_source"] = resolved.agent_source;
  }
  request.messages = json::array();
  if (!t.user_content.empty()) {
    request.messages.push_back({{"message_id", t.user_message_id},
                                {"role", "user"},
                                {"content", t.user_content},
                                {"timestamp", t.user_timestamp},
                                {"metadata", user_meta}});
  } else {
    ++filtering.dropped_messages;
  }
  if (!content.empty()) {
    request.messages.push_back({{"message_id", in.message_id},
                                {"role", "assistant"},
                                {"content", content},
                                {"timestamp", in.timestamp},
                                {"metadata", assistant_meta}});
  } else if (!user_only) {
    ++filtering.dropped_messages;
  }
}

// The answer to a durable commit. read_your_writes delivers it to the end (bounded) before
// answering; eventual answers at once and leaves delivery to the background. The answer echoes
// the turn's recall receipt (moved in, read once); the item is read back without its copy.
ToolResult AnswerCommit(queue::Outbox& outbox, const std::string& item_id,
                        const std::string& turn_id, const std::string& consistency,
                        json recall_receipt, const Filtering& filtering, mcp::ToolContext& ctx,
                        const MemoryToolDeps& deps) {
  const char* kTool = "tmcra_turn_commit";
  if (consistency != "read_your_writes") {
    auto item = outbox.GetForDelivery(item_id);
    // Kicked after the read: the delivery round it starts takes the outbox's lock, and the
    // host should not wait for that.
    deps.delivery->Kick();
    if (!item) return Failure(kTool, item.error());
    return WithFiltering(Projection(*item, turn_id, std::move(recall_receipt)), filtering);
  }
  auto delivered = deps.delivery->DeliverItem(item_id, /*wait_terminal=*/true, deps.commit_wait,
                                              [&ctx] { return ctx.cancelled(); });
  if (!delivered) {
    auto item = outbox.GetForDelivery(item_id);
    if (!item) return Failure(kTool, item.error());
    deps.delivery->Kick();
    return WithFiltering(Projection(*item, turn_id, std::move(recall_receipt)), filtering);
  }
  if (delivered->state == queue::kPending || delivered->state == queue::kSubmitted) {
    deps.delivery->Kick();  // background delivery finishes it
  }
  return WithFiltering(Projection(*delivered, turn_id, std::move(recall_receipt)), filtering);
}

ToolResult Commit(const json& args, mcp::ToolContext& ctx, const MemoryToolDeps& deps,
                  bool user_only) {
  const char* kTool = "tmcra_turn_commit";
  auto in = ReadCommitArguments(args, user_only);
  if (!in) return Failure(kTool, in.error());
  // Filtered before the key is derived and the outbox sees it: a replay of the same answer
  // filters the same way, so it is still a replay. (Added to the status tally once the
  // messages it leaves empty are counted.)
  Filtering filtering;
  const std::string content = FilterText(deps.filter, in->raw_content, filtering);
  auto outbox = deps.delivery->outbox();
  if (!outbox) return Failure(kTool, outbox.error());
  auto turn = (*outbox)->GetTurn(in->turn_id);
  if (!turn) return Failure(kTool, turn.error());
  if (!*turn) {
    return Failure(kTool, Error::NotFound("turn_id is unknown; call tmcra_turn_prepare first"));
  }
  queue::PreparedTurn& t = **turn;
  json resolve_args = args;
  resolve_args["scope"] = t.scope_name;
  auto resolved = Resolve(resolve_args, deps.default_scope, deps.default_agent_id);
  if (!resolved) return Failure(kTool, resolved.error());
  if (t.state != "committed" && deps.controls != nullptr) {
    auto allowed = deps.controls->MayWriteCaptured(t.recall_receipt);
    if (!allowed) return Failure(kTool, allowed.error());
    if (!*allowed) {
      return ToolResult::Ok(
          {{"skipped", true}, {"reason", "session_memory_mode_changed"}, {"submitted", false}});
    }
  }
  const std::string consistency = args.value("consistency", "read_your_writes");
  const std::string slow_policy = args.value("slow_policy", "auto");
  queue::CommitRequest request;
  request.turn_id = in->turn_id;
  request.idempotency_key =
      CommitKey(args, *in, content, t, *resolved, consistency, slow_policy, user_only);
  AddCommitMessages(*in, content, t, *resolved, deps, user_only, filtering, request);
  if (deps.filter_tally != nullptr) deps.filter_tally->Add(filtering);
  if (request.messages.empty()) {
    return ToolResult::Ok({{"skipped", true},
                           {"reason", "nothing_left_after_filtering"},
                           {"submitted", false},
                           {"content_filter", filtering.ToJson()}});
  }
  request.consistency = consistency;
  request.slow_policy = slow_policy;
  request.agent_id = resolved->agent_id;
  auto item_id = (*outbox)->CommitTurn(request);
  if (!item_id) return Failure(kTool, item_id.error());
  TMCRA_FAILPOINT("commit.after_commit_before_reply");
  return AnswerCommit(**outbox, *item_id, in->turn_id, consistency, std::move(t.recall_receipt),
                      filtering, ctx, deps);
}

// ---- tmcra_reconcile ---------------------------------------------------------------------

json ReconcileSchema() {
  return json{{"type", "object"},
              {"properties",
               {{"item_ids",
                 {{"type", "array"},
                  {"maxItems", 1000},
                  {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 200}}}}},
                {"include_dead_letter", {{"type", "boolean"}, {"default", false}}}}},
              {"additionalProperties", false}};
}

// Whether waiting up to `left` can still move one of `open`: a submitted item (its job may
// finish) or one whose backoff ends within it. Otherwise (a retry later, a held credential or
// configuration problem) the answer tells the state now rather than after waiting for nothing.
bool WorthWaiting(queue::Outbox& outbox, const std::set<std::string>& open,
                  std::chrono::steady_clock::duration left) {
  const double wait_until = NowSeconds() + std::chrono::duration<double>(left).count();
  for (const auto& id : open) {
    auto item = outbox.GetForDelivery(id);
    if (!item) continue;
    if (item->state == queue::kSubmitted || item->next_attempt_at <= wait_until) return true;
  }
  return false;
}

// The reconciliation's items: the first kListed in full, the rest counted in `unlisted` (their
// states are in queue_counts), so a backlog cannot produce an oversized answer.
json ListedItems(queue::Outbox& outbox, const std::vector<std::string>& ids,
                 const std::map<std::string, std::string>& replay_errors, size_t& unlisted) {
  constexpr size_t kListed = 200;
  json items = json::array();
  for (const auto& id : ids) {
    if (items.size() >= kListed) {
      ++unlisted;
      continue;
    }
    auto item = outbox.Get(id);
    if (!item) {
      items.push_back({{"item_id", id}, {"status", "unknown"}, {"error", item.error().message}});
      continue;
    }
    json r = RowReceipt(*item, /*compact=*/true);
    if (auto e = replay_errors.find(id); e != replay_errors.end()) r["replay_error"] = e->second;
    items.push_back(std::move(r));
  }
  return items;
}

ToolResult Reconcile(const json& args, mcp::ToolContext& ctx, const MemoryToolDeps& deps) {
  const char* kTool = "tmcra_reconcile";
  auto outbox = deps.delivery->outbox();
  if (!outbox) return Failure(kTool, outbox.error());
  const bool replay = args.value("include_dead_letter", false);
  std::vector<std::string> ids;
  if (args.contains("item_ids")) {
    for (const auto& id : args["item_ids"]) ids.push_back(id.get<std::string>());
  } else {
    std::vector<std::string> states = {queue::kPending, queue::kSubmitted};
    if (replay) states.push_back(queue::kDeadLetter);
    auto due = (*outbox)->InStates(states, 1000000);  // all of them: a backlog is worked off whole
    if (!due) return Failure(kTool, due.error());
    ids = std::move(*due);
  }
  const auto cancelled = [&ctx] { return ctx.cancelled(); };
  // Dead letters to replay go back to pending first, with their original key (never re-minted),
  // so a write that did land is replayed by the service, not duplicated.
  std::map<std::string, std::string> replay_errors;
  if (replay) {
    for (const auto& id : ids) {
      auto item = (*outbox)->Get(id);
      if (!item || item->state != queue::kDeadLetter) continue;
      if (auto s = (*outbox)->Replay(id); !s) replay_errors[id] = s.error().message;
    }
  }
  // Then every item is worked on in batches (one request, and for the embedded memory one fsync,
  // per up to 100 items; the outcomes of up to 100 items per outbox transaction), pass after
  // pass, until each is finished or nothing moved for commit_wait. The first pass tries every
  // pending item at once; later ones respect a failed item's backoff.
  std::set<std::string> open(ids.begin(), ids.end());
  auto last_progress = std::chrono::steady_clock::now();
  for (bool first = true; !open.empty(); first = false) {
    if (ctx.cancelled()) return ToolResult::Fail("tmcra_reconcile was cancelled");
    auto changed = deps.delivery->DeliverBatch({open.begin(), open.end()}, cancelled,
                                               /*due_only=*/!first);
    if (!changed) return Failure(kTool, changed.error());
    auto unfinished = (*outbox)->InStates({queue::kPending, queue::kSubmitted}, 1000000);
    if (!unfinished) return Failure(kTool, unfinished.error());
    std::set<std::string> still;
    for (const auto& id : *unfinished) {
      if (open.count(id) != 0) still.insert(id);
    }
    const auto now = std::chrono::steady_clock::now();
    const bool moved = *changed > 0 || still.size() < open.size();
    if (moved) last_progress = now;
    open = std::move(still);
    if (open.empty() || now - last_progress >= deps.commit_wait) break;
    // Nothing moved, no job is running and every item left waits for a backoff that outlasts
    // this call (a retry later, or a held credential or configuration problem): the answer
    // tells the state now rather than after commit_wait of waiting for nothing.
    if (!moved && !WorthWaiting(**outbox, open, deps.commit_wait - (now - last_progress))) break;
    // Jobs still running (or items backing off): look again shortly.
    std::this_thread::sleep_for(*changed > 0 ? std::chrono::milliseconds(5)
                                             : std::chrono::milliseconds(50));
  }
  size_t unlisted = 0;
  json items = ListedItems(**outbox, ids, replay_errors, unlisted);
  auto counts = Counts(**outbox);
  if (!counts) return Failure(kTool, counts.error());
  return ToolResult::Ok({{"schema_version", kReconcileSchema},
                         {"contract_schema_version", receipts::kContractSchemaVersion},
                         {"receipt_type", "reconciliation"},
                         {"items", std::move(items)},
                         {"items_not_listed", unlisted},
                         {"queue_counts", std::move(*counts)}});
}

// What tmcra_turn_prepare and tmcra_turn_commit answer when the host's hooks run the
// lifecycle (MemoryToolDeps::hooks_host): nothing is written, and it is not an error.
ToolResult HandledByHooks(const json& args, const MemoryToolDeps& deps) {
  return ToolResult::Ok({{"status", "handled_by_hooks"},
                         {"handled_by_hooks", true},
                         {"host", deps.hooks_host},
                         {"turn_id", args.value("turn_id", "")},
                         {"submitted", false},
                         {"message",
                          "This host's tmcra-mcp hooks recall and store every turn "
                          "automatically; this call wrote nothing."}});
}

}  // namespace

ToolResult PrepareTurn(const json& args, const MemoryToolDeps& deps, bool recall) {
  return Prepare(args, deps, recall);
}

ToolResult CommitTurn(const json& args, mcp::ToolContext& ctx, const MemoryToolDeps& deps,
                      bool user_only) {
  return Commit(args, ctx, deps, user_only);
}

void RegisterLifecycleTools(mcp::ToolSet& tools, const MemoryToolDeps& deps) {
  const json write_hints{{"readOnlyHint", false},
                         {"destructiveHint", false},
                         {"idempotentHint", true},
                         {"openWorldHint", false}};
  RegisterTool(tools, "tmcra_turn_prepare", "Prepare a turn",
               "Recall memory and return untrusted injectable context before the host answers.",
               PrepareSchema(), write_hints, [deps](const json& args, mcp::ToolContext&) {
                 return deps.hooks_host.empty() ? Prepare(args, deps, /*recall_memory=*/true)
                                                : HandledByHooks(args, deps);
               });
  RegisterTool(
      tools, "tmcra_turn_commit", "Commit a turn",
      "Commit the real user/assistant turn and reconcile it to terminal state.", CommitSchema(),
      write_hints,
      [deps](const json& args, mcp::ToolContext& ctx) {
        return deps.hooks_host.empty() ? Commit(args, ctx, deps, /*user_only=*/false)
                                       : HandledByHooks(args, deps);
      },
      /*may_wait=*/true);  // read_your_writes waits for the turn's jobs
  RegisterTool(
      tools, "tmcra_reconcile", "Reconcile pending writes",
      "Retry durable pending records and report succeeded or dead-letter states. "
      "Optionally name item_ids, and set include_dead_letter to replay dead letters "
      "with their original idempotency keys.",
      ReconcileSchema(), write_hints,
      [deps](const json& args, mcp::ToolContext& ctx) { return Reconcile(args, ctx, deps); },
      /*may_wait=*/true);
}

}  // namespace tmcra::tools
