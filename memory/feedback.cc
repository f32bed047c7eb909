// EngineImpl::Evidence and EngineImpl::Feedback (docs/contract.md §1.4.4, §1.4.5), and the
// feedback effects EngineImpl::Recall applies (memory/feedback.h).
#include "memory/feedback.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/identifiers.h"
#include "base/ids.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "memory/engine_impl.h"
#include "memory/ingest_validation.h"

namespace tmcra::memory {

namespace {

constexpr int kMaxEvidenceLimit = 25;
constexpr size_t kMaxMemoryIds = 100;  // in the request, and resolved
constexpr size_t kMaxMemoryIdLength = 200;
constexpr size_t kMaxQueryIdLength = 200;
constexpr size_t kMaxCommentLength = 4000;
constexpr size_t kMaxReplacementLength = 4000;
constexpr const char* kEvidenceSchema = "tmcra.service.memory-graph-evidence.1";

std::string NewId(std::string_view prefix) {
  std::string out(prefix);
  for (char c : UuidV4()) {
    if (c != '-') out.push_back(c);
  }
  return out;
}

Error KeyError() {
  return Error::Api(Errc::kInvalidArgument, "validation_error",
                    "Idempotency-Key: a feedback action other than note needs an "
                    "Idempotency-Key of 8..200 characters",
                    json::array({{{"loc", {"header", "Idempotency-Key"}},
                                  {"msg", "Idempotency-Key must be 8..200 characters"},
                                  {"type", "value_error"}}})
                        .dump());
}

}  // namespace

// ---- FeedbackRequest validation ----------------------------------------------------------

struct FeedbackRequest {
  std::string rating;
  std::string action = "note";
  std::vector<std::string> memory_ids;  // trimmed, in order, duplicates kept
  std::optional<std::string> query_id;
  std::optional<std::string> comment;
  std::optional<std::string> replacement;
  json metadata = json::object();

  // The normalised request, as stored and hashed for idempotency.
  json ToJson() const {
    const auto opt = [](const std::optional<std::string>& v) {
      return v ? json(*v) : json(nullptr);
    };
    return json{{"rating", rating},         {"action", action},
                {"memory_ids", memory_ids}, {"query_id", opt(query_id)},
                {"comment", opt(comment)},  {"replacement", opt(replacement)},
                {"metadata", metadata}};
  }
};

namespace {

// An optional string member: absent or null gives nullopt; otherwise a string, trimmed, with
// code-point bounds.
Result<std::optional<std::string>> OptionalText(const json& body, const char* key, size_t min,
                                                size_t max) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string())
    return ValidationError(key, "Input should be a valid string", "string_type");
  std::string value = Trim(it->get<std::string>());
  const size_t length = CodePointLength(value);
  if (length < min) {
    return ValidationError(
        key,
        "String should have at least " + std::to_string(min) + " character" + (min == 1 ? "" : "s"),
        "string_too_short");
  }
  if (length > max) {
    return ValidationError(key, "String should have at most " + std::to_string(max) + " characters",
                           "string_too_long");
  }
  return std::optional<std::string>(std::move(value));
}

Result<std::string> Choice(const json& body, const char* key,
                           std::initializer_list<const char*> allowed, const char* fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (fallback != nullptr) return std::string(fallback);
    return ValidationError(key, "Field required", "missing");
  }
  std::string list;
  for (const char* a : allowed) {
    if (it->is_string() && it->get<std::string>() == a) return std::string(a);
    list += list.empty() ? "" : ", ";
    list += std::string("'") + a + "'";
  }
  return ValidationError(key, "Input should be " + list, "enum");
}

// memory_ids: absent, null or a list of at most 100 non-blank ids of at most 200 characters,
// each trimmed.
Result<std::vector<std::string>> MemoryIds(const json& body) {
  std::vector<std::string> out;
  auto ids = body.find("memory_ids");
  if (ids == body.end() || ids->is_null()) return out;
  if (!ids->is_array())
    return ValidationError("memory_ids", "Input should be a valid list", "list_type");
  if (ids->size() > kMaxMemoryIds) {
    return ValidationError("memory_ids", "List should have at most 100 items", "too_long");
  }
  for (size_t i = 0; i < ids->size(); ++i) {
    const std::string loc = "memory_ids." + std::to_string(i);
    const json& id = (*ids)[i];
    if (!id.is_string())
      return ValidationError(loc, "Input should be a valid string", "string_type");
    std::string value = Trim(id.get<std::string>());
    if (value.empty()) {
      return ValidationError(loc, "String should have at least 1 character", "string_too_short");
    }
    if (CodePointLength(value) > kMaxMemoryIdLength) {
      return ValidationError(loc, "String should have at most 200 characters", "string_too_long");
    }
    out.push_back(std::move(value));
  }
  return out;
}

// metadata: absent or null (an empty dictionary), or a dictionary of at most 64 keys and 8192 bytes
// as compact JSON.
Result<json> FeedbackMetadata(const json& body) {
  auto md = body.find("metadata");
  if (md == body.end() || md->is_null()) return json::object();
  if (!md->is_object()) {
    return ValidationError("metadata", "Input should be a valid dictionary", "dict_type");
  }
  if (md->size() > 64) return ValidationError("metadata", "metadata may have at most 64 keys");
  if (md->dump(-1, ' ', false, json::error_handler_t::replace).size() > 8192) {
    return ValidationError("metadata", "metadata must be at most 8192 bytes as compact JSON");
  }
  return *md;
}

Result<FeedbackRequest> ValidateFeedback(const json& body) {
  if (!body.is_object()) {
    return ValidationError("body", "Input should be a valid dictionary", "dict_type");
  }
  static const std::set<std::string> kAllowed = {"query_id", "rating", "memory_ids", "comment",
                                                 "metadata", "action", "replacement"};
  for (const auto& [key, value] : body.items()) {
    if (kAllowed.count(key) == 0) {
      return ValidationError(key, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  FeedbackRequest r;
  auto rating =
      Choice(body, "rating", {"helpful", "incorrect", "stale", "unsafe", "missing"}, nullptr);
  if (!rating) return rating.error();
  r.rating = *rating;
  auto action = Choice(body, "action", {"note", "ignore", "correct", "restore"}, "note");
  if (!action) return action.error();
  r.action = *action;

  TMCRA_ASSIGN_OR_RETURN(r.memory_ids, MemoryIds(body));
  auto query_id = OptionalText(body, "query_id", 0, kMaxQueryIdLength);
  if (!query_id) return query_id.error();
  r.query_id = *query_id;
  auto comment = OptionalText(body, "comment", 0, kMaxCommentLength);
  if (!comment) return comment.error();
  r.comment = *comment;
  auto replacement = OptionalText(body, "replacement", 1, kMaxReplacementLength);
  if (!replacement) return replacement.error();
  r.replacement = *replacement;
  TMCRA_ASSIGN_OR_RETURN(r.metadata, FeedbackMetadata(body));
  if (r.action != "note" && r.memory_ids.empty()) {
    return ValidationError("memory_ids", "action '" + r.action + "' needs non-blank memory_ids");
  }
  if (r.action == "correct" && !r.replacement) {
    return ValidationError("replacement", "action 'correct' needs a replacement", "missing");
  }
  if (r.action != "correct" && r.replacement) {
    return ValidationError("replacement", "only action 'correct' may send a replacement");
  }
  return r;
}

// ---- Shared reads --------------------------------------------------------------------------

constexpr const char* kSourceColumns =
    "record_id, session_id, message_id, role, content, timestamp, agent_id, target_agent_id, "
    "metadata_json";

json NullableText(const db::Statement& st, int column) {
  return st.IsNull(column) ? json(nullptr) : json(st.Text(column));
}

// One evidence item for the record at the statement's current row (kSourceColumns).
json EvidenceItem(const db::Statement& st, const char* relationship) {
  const std::string text = st.Text(4);
  const std::string role = st.Text(3);
  const json metadata = json::parse(st.Text(8), nullptr, false);
  const auto agent_field = [&](const char* key, const char* nested) -> json {
    if (!metadata.is_object()) return nullptr;
    if (auto it = metadata.find(key); it != metadata.end() && it->is_string()) return *it;
    if (auto agent = metadata.find("agent"); agent != metadata.end() && agent->is_object()) {
      if (auto it = agent->find(nested); it != agent->end() && it->is_string()) return *it;
    }
    return nullptr;
  };
  return json{{"source_record_id", st.Text(0)},
              {"relationship", relationship},
              {"session_id", st.Text(1)},
              {"message_id", st.Text(2)},
              {"role", role},
              {"actor_role", role},
              {"agent_id", NullableText(st, 6)},
              {"agent_name", agent_field("agent_name", "name")},
              {"agent_role", agent_field("agent_role", "role")},
              {"agent_specialty", agent_field("agent_specialty", "specialty")},
              {"agent_team", agent_field("agent_team", "team")},
              {"target_agent_id", NullableText(st, 7)},
              {"occurred_at", st.Text(5)},
              {"text", text},
              {"text_sha256", Sha256Hex(text)},
              {"source_text_verbatim", true},
              {"evidence_char_start", 0},
              {"evidence_char_end", CodePointLength(text)}};
}

// The feedback's sequence number when `feedback_id` is a feedback of `scope`.
Result<std::optional<int64_t>> FindFeedback(db::Database& db, std::string_view scope,
                                            std::string_view feedback_id) {
  auto st = db.Prepare("SELECT seq FROM feedback WHERE feedback_id = ? AND scope_name = ?");
  if (!st) return st.error();
  st->Bind(1, feedback_id).Bind(2, scope);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<int64_t>();
  return std::optional<int64_t>(st->Int(0));
}

Result<std::vector<std::string>> FeedbackTargets(db::Database& db, int64_t seq) {
  auto st =
      db.Prepare("SELECT record_id FROM feedback_targets WHERE feedback_seq = ? ORDER BY position");
  if (!st) return st.error();
  st->Bind(1, seq);
  std::vector<std::string> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(st->Text(0));
  }
}

// The FeedbackView of a stored feedback; the correction's index status is its job's status now.
Result<json> LoadFeedbackView(db::Database& db, std::string_view feedback_id) {
  auto st = db.Prepare(
      "SELECT f.feedback_id, f.scope_name, f.rating, f.created_at, f.action, f.correction_job_id, "
      "j.status FROM feedback f LEFT JOIN jobs j ON j.job_id = f.correction_job_id "
      "WHERE f.feedback_id = ?");
  if (!st) return st.error();
  st->Bind(1, feedback_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return Error::Internal("a stored feedback vanished");
  const std::string action = st->Text(4);
  return json{{"feedback_id", st->Text(0)},
              {"scope_name", st->Text(1)},
              {"rating", st->Text(2)},
              {"created_at", st->Double(3)},
              {"action", action},
              {"effective", action != "note"},
              {"correction_job_id", NullableText(*st, 5)},
              {"correction_index_status", NullableText(*st, 6)}};
}

// The feedback stored under `idempotency_key`, when there is one: its id; a 409 when the key
// was used with another request.
Result<std::optional<std::string>> FeedbackOfKey(db::Database& db, const std::string& tenant_id,
                                                 std::string_view idempotency_key,
                                                 const std::string& payload_sha) {
  if (idempotency_key.empty()) return std::optional<std::string>();
  auto existing = db.Prepare(
      "SELECT feedback_id, payload_sha256 FROM feedback WHERE tenant_id = ? AND "
      "idempotency_key = ?");
  if (!existing) return existing.error();
  existing->Bind(1, tenant_id).Bind(2, idempotency_key);
  auto row = existing->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::string>();
  if (existing->Text(1) != payload_sha) {
    return Error::Api(Errc::kConflict, "idempotency_conflict",
                      "Idempotency-Key was already used with a different feedback request");
  }
  return std::optional<std::string>(existing->Text(0));
}

// The records a feedback targets in `scope`, each once, in first-seen order: record ids, and
// for restore also feedback ids (the records that feedback targeted). 404 names the ids found
// nowhere; 422 when they resolve to no record (but for a note) or to more than 100.
Result<std::vector<std::string>> ResolveTargets(db::Database& db, std::string_view scope,
                                                const FeedbackRequest& request) {
  std::vector<std::string> targets;
  std::set<std::string> seen_ids;
  std::set<std::string> seen_records;
  std::vector<std::string> missing;
  auto record = db.Prepare("SELECT 1 FROM records WHERE record_id = ? AND scope_name = ?");
  if (!record) return record.error();
  const auto add = [&](const std::string& id) {
    if (seen_records.insert(id).second) targets.push_back(id);
  };
  for (const std::string& id : request.memory_ids) {
    if (!seen_ids.insert(id).second) continue;
    record->Reset();
    record->Bind(1, id).Bind(2, scope);
    auto row = record->Step();
    if (!row) return row.error();
    if (*row) {
      add(id);
      continue;
    }
    if (request.action == "restore") {
      auto feedback = FindFeedback(db, scope, id);
      if (!feedback) return feedback.error();
      if (*feedback) {
        auto records = FeedbackTargets(db, **feedback);
        if (!records) return records.error();
        for (const auto& r : *records) add(r);
        continue;
      }
    }
    missing.push_back(id);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Error::Api(Errc::kNotFound, "not_found",
                      "feedback targets not found in this scope: " + list,
                      json{{"missing_memory_ids", missing}}.dump());
  }
  if (request.action != "note" && targets.empty()) {
    return ValidationError("memory_ids", "the memory_ids resolve to no memory");
  }
  if (targets.size() > kMaxMemoryIds) {
    return ValidationError("memory_ids", "the memory_ids resolve to more than 100 memories");
  }
  return targets;
}

// Stores the feedback row and its targets; returns the row's seq.
Result<int64_t> InsertFeedback(db::Database& db, const std::string& tenant_id,
                               const std::string& feedback_id, std::string_view scope,
                               const FeedbackRequest& request, std::string_view idempotency_key,
                               const std::string& payload_sha, const std::string& payload_text,
                               double now, const std::vector<std::string>& targets) {
  auto insert = db.Prepare(
      "INSERT INTO feedback(feedback_id, tenant_id, scope_name, rating, action, idempotency_key, "
      "payload_sha256, request_json, created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert) return insert.error();
  insert->Bind(1, feedback_id)
      .Bind(2, tenant_id)
      .Bind(3, scope)
      .Bind(4, request.rating)
      .Bind(5, request.action);
  if (idempotency_key.empty()) {
    insert->BindNull(6);
  } else {
    insert->Bind(6, idempotency_key);
  }
  insert->Bind(7, payload_sha).Bind(8, payload_text).Bind(9, now);
  if (auto s = insert->Run(); !s) return s.error();
  const int64_t seq = db.LastInsertRowId();
  auto target = db.Prepare(
      "INSERT INTO feedback_targets(feedback_seq, position, record_id, scope_name) "
      "VALUES(?, ?, ?, ?)");
  if (!target) return target.error();
  for (size_t i = 0; i < targets.size(); ++i) {
    target->Reset();
    target->Bind(1, seq).Bind(2, static_cast<int64_t>(i)).Bind(3, targets[i]).Bind(4, scope);
    if (auto s = target->Run(); !s) return s.error();
  }
  return seq;
}

}  // namespace

std::string CorrectionSession(std::string_view feedback_id) {
  return "correction-" + std::string(feedback_id);
}

Result<FeedbackEffects> LoadFeedbackEffects(db::Database& db, std::string_view scope) {
  FeedbackEffects out;
  auto st = db.Prepare(
      "SELECT t.record_id, f.action, f.feedback_id FROM feedback_targets t "
      "JOIN feedback f ON f.seq = t.feedback_seq "
      "WHERE t.scope_name = ? AND f.action IN ('ignore', 'correct', 'restore') "
      "ORDER BY t.feedback_seq, t.position");
  if (!st) return st.error();
  st->Bind(1, scope);
  std::map<std::string, std::pair<std::string, std::string>> newest;  // record -> action, id
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) break;
    newest[st->Text(0)] = {st->Text(1), st->Text(2)};
  }
  if (newest.empty()) return out;  // no feedback, hence no correction either
  std::set<std::string> corrections_in_effect;
  for (const auto& [record, state] : newest) {
    if (state.first == "ignore" || state.first == "correct") out.hidden_records.insert(record);
    if (state.first == "correct") corrections_in_effect.insert(state.second);
  }
  auto corrections =
      db.Prepare("SELECT feedback_id FROM feedback WHERE scope_name = ? AND action = 'correct'");
  if (!corrections) return corrections.error();
  corrections->Bind(1, scope);
  for (;;) {
    auto row = corrections->Step();
    if (!row) return row.error();
    if (!*row) break;
    const std::string id = corrections->Text(0);
    if (corrections_in_effect.count(id) == 0) out.hidden_sessions.insert(CorrectionSession(id));
  }
  return out;
}

namespace {

Error EvidenceLimitError() {
  return Error::Api(Errc::kInvalidArgument, "validation_error", "limit: Input should be 1..25",
                    json::array({{{"loc", {"query", "limit"}},
                                  {"msg",
                                   "Input should be greater than or equal to 1 and less "
                                   "than or equal to 25"},
                                  {"type", "value_error"}}})
                        .dump());
}

// The evidence items of `memory_id`: the record itself, or the records a feedback id targeted
// (what `restore` may target).
Result<json> EvidenceItems(db::Database& db, std::string_view scope, std::string_view memory_id) {
  TMCRA_ASSIGN_OR_RETURN(auto record,
                         db.Prepare(std::string("SELECT ") + kSourceColumns +
                                    " FROM records WHERE record_id = ? AND scope_name = ?"));
  json items = json::array();
  const auto load = [&](std::string_view id, const char* relationship) -> Result<bool> {
    record.Reset();
    record.Bind(1, id).Bind(2, scope);
    TMCRA_ASSIGN_OR_RETURN(const bool row, record.Step());
    if (row) items.push_back(EvidenceItem(record, relationship));
    return row;
  };
  TMCRA_ASSIGN_OR_RETURN(const bool found, load(memory_id, "source"));
  if (found) return items;
  TMCRA_ASSIGN_OR_RETURN(const auto feedback, FindFeedback(db, scope, memory_id));
  if (!feedback)
    return Error::Api(Errc::kNotFound, "not_found", "memory node not found in this scope");
  TMCRA_ASSIGN_OR_RETURN(const auto targets, FeedbackTargets(db, *feedback));
  for (const std::string& id : targets) TMCRA_RETURN_IF_ERROR(load(id, "feedback_target"));
  if (items.empty())
    return Error::Api(Errc::kNotFound, "not_found", "the feedback targets no memory");
  return items;
}

// The scope's snapshot id ("events-<last seq>"), or "events-0" for a scope without records.
Result<json> EvidenceSnapshot(db::Database& db, std::string_view scope) {
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare("SELECT last_event_seq FROM scopes WHERE name = ?"));
  st.Bind(1, scope);
  TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
  if (row && !st.IsNull(0)) return json("events-" + std::to_string(st.Int(0)));
  return json("events-0");
}

}  // namespace

Result<json> EngineImpl::Evidence(std::string_view scope, std::string_view memory_id, int limit) {
  if (options_.shared) TMCRA_RETURN_IF_ERROR(SyncReplica());
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  if (limit < 1 || limit > kMaxEvidenceLimit) return EvidenceLimitError();
  std::lock_guard lock(api_mu_);
  TMCRA_ASSIGN_OR_RETURN(db::Database * api_db, ApiDb());
  db::Database& db = *api_db;
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Deferred(db));
  TMCRA_ASSIGN_OR_RETURN(json items, EvidenceItems(db, scope, memory_id));
  TMCRA_ASSIGN_OR_RETURN(json snapshot, EvidenceSnapshot(db, scope));
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  const bool truncated = items.size() > static_cast<size_t>(limit);
  if (truncated) items.erase(items.begin() + limit, items.end());
  return json{{"schema_version", kEvidenceSchema},
              {"scope_name", scope},
              {"snapshot_id", std::move(snapshot)},
              {"snapshot_state", "committed"},
              {"provisional", false},
              {"memory_id", memory_id},
              {"items", std::move(items)},
              {"page",
               {{"limit", limit},
                {"offset", 0},
                {"truncated", truncated},
                {"next_cursor", nullptr},
                {"returned_neighbors", nullptr},
                {"has_more", truncated}}}};
}

Result<json> EngineImpl::Feedback(std::string_view scope, const json& body,
                                  std::string_view idempotency_key) {
  return Noted(FeedbackNow(scope, body, idempotency_key));
}

namespace {

// The Idempotency-Key: 8..200 characters, and required for every action but a note.
Status CheckFeedbackKey(const std::string& action, std::string_view idempotency_key) {
  const size_t key_length = CodePointLength(idempotency_key);
  if ((action != "note" && idempotency_key.empty()) ||
      (!idempotency_key.empty() && (key_length < 8 || key_length > 200))) {
    return KeyError();
  }
  return Ok();
}

// The ingest that stores a correction's replacement as a user message of its own session.
json CorrectionIngest(const std::string& feedback_id, const std::string& replacement,
                      const std::vector<std::string>& targets, double now) {
  return json{
      {"session_id", CorrectionSession(feedback_id)},
      {"messages", json::array({{{"message_id", feedback_id},
                                 {"role", "user"},
                                 {"content", replacement},
                                 {"timestamp", FormatIsoUtc(now)},
                                 {"metadata", {{"actor_role", "user"}}}}})},
      {"consistency", "eventual"},
      {"metadata",
       {{"source", "feedback_correction"}, {"feedback_id", feedback_id}, {"corrects", targets}}}};
}

// The FeedbackView of a shared store's feedback.
json SharedFeedbackView(const SharedStore::StoredFeedback& stored) {
  const SharedStore::FeedbackRow& f = stored.feedback;
  const auto nullable = [](const std::optional<std::string>& v) {
    return v ? json(*v) : json(nullptr);
  };
  return json{{"feedback_id", f.feedback_id},
              {"scope_name", f.scope_name},
              {"rating", f.rating},
              {"created_at", f.created_at},
              {"action", f.action},
              {"effective", f.action != "note"},
              {"correction_job_id", nullable(f.correction_job_id)},
              {"correction_index_status", nullable(stored.correction_status)}};
}

// A feedback stored under the request's key before: its view, or a 409 when it was another
// request.
Result<json> ReplayedFeedback(const SharedStore::StoredFeedback& stored,
                              const std::string& payload_sha) {
  if (stored.feedback.payload_sha256 != payload_sha) {
    return Error::Api(Errc::kConflict, "idempotency_conflict",
                      "Idempotency-Key was already used with a different feedback request");
  }
  return SharedFeedbackView(stored);
}

}  // namespace

Status EngineImpl::IngestCorrection(db::Database& db, std::string_view scope,
                                    const std::string& feedback_id, int64_t seq,
                                    const std::string& replacement,
                                    const std::vector<std::string>& targets, double now,
                                    bool* job_created) {
  IngestContext context;
  context.idempotency_key = CorrectionSession(feedback_id);
  TMCRA_ASSIGN_OR_RETURN(
      const json job,
      IngestInTransaction(db, scope, CorrectionIngest(feedback_id, replacement, targets, now),
                          context, job_created));
  TMCRA_ASSIGN_OR_RETURN(auto update,
                         db.Prepare("UPDATE feedback SET correction_job_id = ? WHERE seq = ?"));
  update.Bind(1, job["job_id"].get<std::string>()).Bind(2, seq);
  return update.Run();
}

Result<json> EngineImpl::FeedbackNow(std::string_view scope, const json& body,
                                     std::string_view idempotency_key) {
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  auto request = ValidateFeedback(body);
  if (!request) return request.error();
  TMCRA_RETURN_IF_ERROR(CheckFeedbackKey(request->action, idempotency_key));
  // Hashed as received (a change of the filter's rules never turns a retry into a conflict);
  // stored and applied filtered.
  const json payload = request->ToJson();
  const std::string payload_sha =
      Sha256Hex(CanonicalJson(json{{"scope_name", scope}, {"payload", payload}}));
  for (std::optional<std::string>* text : {&request->comment, &request->replacement}) {
    if (*text) **text = filter_.Apply(**text).text;
  }
  const std::string payload_text = CanonicalJson(request->ToJson());
  if (options_.shared) {
    return SharedFeedback(scope, *request, idempotency_key, payload_sha, payload_text);
  }

  std::lock_guard lock(api_mu_);
  auto api_db = ApiDb();
  if (!api_db) return api_db.error();
  db::Database& db = **api_db;
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();

  // Idempotency: the same key and request replay the stored feedback, nothing is applied again.
  TMCRA_ASSIGN_OR_RETURN(const auto replayed,
                         FeedbackOfKey(db, options_.tenant_id, idempotency_key, payload_sha));
  if (replayed) {
    auto view = LoadFeedbackView(db, *replayed);
    if (!view) return view.error();
    if (auto s = tx->Commit(); !s) return s.error();
    return view;
  }

  // Resolve the targets in this scope: record ids, and for restore also feedback ids (which
  // stand for the records that feedback targeted).
  TMCRA_ASSIGN_OR_RETURN(const std::vector<std::string> targets,
                         ResolveTargets(db, scope, *request));

  const std::string feedback_id = NewId("fb_");
  const double now = NowSeconds();
  TMCRA_ASSIGN_OR_RETURN(const int64_t seq,
                         InsertFeedback(db, options_.tenant_id, feedback_id, scope, *request,
                                        idempotency_key, payload_sha, payload_text, now, targets));

  // A correction's replacement becomes a user message of its own session, ingested in this
  // transaction, so the feedback and its correction job exist together or not at all.
  bool job_created = false;
  if (request->action == "correct") {
    TMCRA_RETURN_IF_ERROR(IngestCorrection(db, scope, feedback_id, seq, *request->replacement,
                                           targets, now, &job_created));
  }
  auto view = LoadFeedbackView(db, feedback_id);
  if (!view) return view.error();
  if (auto s = tx->Commit(); !s) return s.error();
  if (job_created) SignalWorker();
  return view;
}

Result<json> EngineImpl::SharedFeedback(std::string_view scope, const FeedbackRequest& request,
                                        std::string_view idempotency_key,
                                        const std::string& payload_sha,
                                        const std::string& payload_text) {
  SharedStore& store = *options_.shared;
  if (!idempotency_key.empty()) {
    TMCRA_ASSIGN_OR_RETURN(const auto stored,
                           store.FeedbackOfKey(options_.tenant_id, idempotency_key));
    if (stored) return ReplayedFeedback(*stored, payload_sha);
  }
  // The targets are resolved in this index, brought up to the store's newest change first.
  TMCRA_RETURN_IF_ERROR(SyncReplica());
  SharedStore::FeedbackRow row;
  {
    auto reader = BorrowReader();
    if (!reader) return reader.error();
    TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Deferred(reader->db()));
    TMCRA_ASSIGN_OR_RETURN(row.targets, ResolveTargets(reader->db(), scope, request));
  }
  row.feedback_id = NewId("fb_");
  row.tenant_id = options_.tenant_id;
  row.scope_name = std::string(scope);
  row.rating = request.rating;
  row.action = request.action;
  if (!idempotency_key.empty()) row.idempotency_key = std::string(idempotency_key);
  row.payload_sha256 = payload_sha;
  row.request_json = payload_text;
  row.created_at = NowSeconds();
  std::optional<SharedStore::JobRow> correction;
  if (request.action == "correct") {
    IngestContext context;
    context.idempotency_key = CorrectionSession(row.feedback_id);
    TMCRA_ASSIGN_OR_RETURN(const PreparedIngest prepared,
                           PrepareIngest(scope,
                                         CorrectionIngest(row.feedback_id, *request.replacement,
                                                          row.targets, row.created_at),
                                         context.idempotency_key, context));
    if (CanonicalJsonHoldsNul(prepared.payload_text)) {
      return ValidationError("replacement",
                             "U+0000 (NUL) cannot be stored in a PostgreSQL memory store");
    }
    correction = SharedJobRow(scope, prepared);
    row.correction_job_id = correction->job_id;
  }
  TMCRA_ASSIGN_OR_RETURN(const auto stored, store.AddFeedback(row, correction));
  if (!stored.created) return ReplayedFeedback(stored, payload_sha);
  if (correction) SignalWorker();
  return SharedFeedbackView(stored);
}

Result<bool> AddSharedFeedback(db::Database& db, const SharedStore::FeedbackRow& f) {
  TMCRA_ASSIGN_OR_RETURN(
      auto insert,
      db.Prepare("INSERT OR IGNORE INTO feedback(feedback_id, tenant_id, scope_name, rating, "
                 "action, idempotency_key, payload_sha256, request_json, created_at, "
                 "correction_job_id) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(1, f.feedback_id)
      .Bind(2, f.tenant_id)
      .Bind(3, f.scope_name)
      .Bind(4, f.rating)
      .Bind(5, f.action)
      .Bind(6, f.idempotency_key)
      .Bind(7, f.payload_sha256)
      .Bind(8, f.request_json)
      .Bind(9, f.created_at)
      .Bind(10, f.correction_job_id);
  TMCRA_RETURN_IF_ERROR(insert.Run());
  if (db.Changes() == 0) return false;
  const int64_t seq = db.LastInsertRowId();
  TMCRA_ASSIGN_OR_RETURN(
      auto target, db.Prepare("INSERT INTO feedback_targets(feedback_seq, position, record_id, "
                              "scope_name) VALUES(?, ?, ?, ?)"));
  for (size_t i = 0; i < f.targets.size(); ++i) {
    target.Reset();
    target.Bind(1, seq)
        .Bind(2, static_cast<int64_t>(i))
        .Bind(3, f.targets[i])
        .Bind(4, f.scope_name);
    TMCRA_RETURN_IF_ERROR(target.Run());
  }
  return true;
}

Status DeleteSharedFeedback(db::Database& db, std::string_view feedback_id) {
  TMCRA_ASSIGN_OR_RETURN(auto targets,
                         db.Prepare("DELETE FROM feedback_targets WHERE feedback_seq IN (SELECT "
                                    "seq FROM feedback WHERE feedback_id = ?)"));
  targets.Bind(1, feedback_id);
  TMCRA_RETURN_IF_ERROR(targets.Run());
  TMCRA_ASSIGN_OR_RETURN(auto feedback, db.Prepare("DELETE FROM feedback WHERE feedback_id = ?"));
  feedback.Bind(1, feedback_id);
  return feedback.Run();
}

}  // namespace tmcra::memory
