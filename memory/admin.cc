// The engine's maintenance calls (memory/engine.h): per-scope figures, forget, erase, export and
// import. docs/memory-commands.md describes them for users, with the export format.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/identifiers.h"
#include "base/json_reader.h"
#include "base/utf8.h"
#include "memory/cjk.h"
#include "memory/engine_impl.h"
#include "memory/feedback.h"
#include "memory/ingest_validation.h"
#include "memory/stems.h"

namespace tmcra::memory {

namespace {

constexpr size_t kPreviewRecords = 20;
constexpr size_t kExcerptCodePoints = 120;
constexpr size_t kMaxPhraseBytes = 4096;
constexpr size_t kMaxMessageIds = 1000;
// The full-text indexes, each with the column it indexes (the CJK index holds derived text).
constexpr const char* kIndexes[] = {"records_fts", "records_tri", "records_cjk"};

// What a Forget selects in one scope (every selector given must hold), and a record on its way
// out: as a shared store takes and answers them.
using ForgetSelector = SharedStore::ForgetSelection;
using Doomed = SharedStore::ForgottenRecord;

std::optional<std::string> OptionalText(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  return it->is_string() ? std::optional<std::string>(it->get<std::string>()) : std::nullopt;
}

Result<std::optional<std::vector<std::string>>> MessageIds(const json& body) {
  auto it = body.find("message_ids");
  if (it == body.end() || it->is_null()) return std::optional<std::vector<std::string>>();
  if (!it->is_array() || it->empty() || it->size() > kMaxMessageIds) {
    return ValidationError("message_ids", "Input should be a list of 1 to 1000 message ids",
                           "list_type");
  }
  std::vector<std::string> ids;
  for (const json& id : *it) {
    if (!id.is_string() || id.get_ref<const std::string&>().empty()) {
      return ValidationError("message_ids", "each message id should be a non-empty string",
                             "string_type");
    }
    ids.push_back(id.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(ids));
}

Status CheckKnownFields(const json& body, std::initializer_list<const char*> known) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&key](const char* k) { return key == k; })) {
      return ValidationError(key, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  return Ok();
}

Result<ForgetSelector> ValidateForget(const json& body) {
  if (!body.is_object()) {
    return ValidationError("body", "Input should be a valid dictionary", "dict_type");
  }
  TMCRA_RETURN_IF_ERROR(
      CheckKnownFields(body, {"session_id", "message_ids", "before", "match", "all", "dry_run"}));
  for (const char* key : {"session_id", "before", "match"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_null() && !it->is_string()) {
      return ValidationError(key, "Input should be a valid string", "string_type");
    }
  }
  for (const char* key : {"all", "dry_run"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_boolean()) {
      return ValidationError(key, "Input should be a valid boolean", "bool_type");
    }
  }
  ForgetSelector s;
  s.session_id = OptionalText(body, "session_id");
  TMCRA_ASSIGN_OR_RETURN(s.message_ids, MessageIds(body));
  if (auto before = OptionalText(body, "before")) {
    s.before = ParseIsoTimestamp(*before);
    if (!s.before) {
      return ValidationError("before", "Input should be a valid datetime (YYYY-MM-DD[THH:MM...])",
                             "datetime_parsing");
    }
  }
  s.match = OptionalText(body, "match");
  if (s.match && (s.match->empty() || s.match->size() > kMaxPhraseBytes)) {
    return ValidationError("match", "the phrase should have 1 to 4096 bytes", "string_too_long");
  }
  if (s.session_id && s.session_id->empty()) {
    return ValidationError("session_id", "String should have at least 1 character",
                           "string_too_short");
  }
  s.all = body.value("all", false);
  s.dry_run = body.value("dry_run", false);
  if (!s.session_id && !s.message_ids && !s.before && !s.match && !s.all) {
    return ValidationError(
        "body", "name what to forget: session_id, message_ids, before, match or all", "missing");
  }
  return s;
}

Doomed ReadDoomed(const db::Statement& st) {
  return Doomed{st.Int(0),  st.Text(1), st.Text(2), st.Text(3),
                st.Text(4), st.Text(5), st.Text(6), st.Text(7)};
}

constexpr const char* kDoomedColumns =
    "SELECT event_seq, record_id, scope_name, session_id, role, timestamp, content, job_id "
    "FROM records ";

// The records of `scope` the selector names, oldest first.
Result<std::vector<Doomed>> SelectDoomed(db::Database& db, std::string_view scope,
                                         const ForgetSelector& s) {
  const std::string sql = std::string(kDoomedColumns) +
                          "WHERE scope_name = ?1 AND (?2 IS NULL OR session_id = ?2) "
                          "AND (?3 IS NULL OR occurred_at < ?3) "
                          "AND (?4 IS NULL OR instr(content, ?4) > 0) "
                          "AND (?5 IS NULL OR message_id IN (SELECT value FROM json_each(?5))) "
                          "ORDER BY occurred_at, event_seq";
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare(sql));
  st.Bind(1, scope).Bind(2, s.session_id).Bind(4, s.match);
  if (s.before) {
    st.Bind(3, *s.before);
  } else {
    st.BindNull(3);
  }
  if (s.message_ids) {
    st.Bind(5, json(*s.message_ids).dump());
  } else {
    st.BindNull(5);
  }
  std::vector<Doomed> out;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return out;
    out.push_back(ReadDoomed(st));
  }
}

// The oldest records of every scope whose texts add up to `bytes` or more.
Result<std::vector<Doomed>> SelectOldest(db::Database& db, int64_t bytes) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db.Prepare(std::string(kDoomedColumns) + "ORDER BY occurred_at, event_seq"));
  std::vector<Doomed> out;
  int64_t total = 0;
  while (total < bytes) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    out.push_back(ReadDoomed(st));
    total += static_cast<int64_t>(out.back().content.size());
  }
  return out;
}

// Removes a record's entry from each full-text index that holds one. The word and trigram
// indexes take the record's text to find its entries; the CJK index its derived text.
Status Unindex(db::Database& db, const Doomed& d) {
  for (const char* index : kIndexes) {
    TMCRA_ASSIGN_OR_RETURN(
        auto held, db.Prepare(std::string("SELECT 1 FROM ") + index + "_docsize WHERE id = ?"));
    held.Bind(1, d.seq);
    TMCRA_ASSIGN_OR_RETURN(const bool present, held.Step());
    if (!present) continue;
    const bool cjk = std::string_view(index) == "records_cjk";
    TMCRA_ASSIGN_OR_RETURN(
        auto remove, db.Prepare(std::string("INSERT INTO ") + index + "(" + index + ", rowid, " +
                                (cjk ? "grams" : "content") + ") VALUES('delete', ?, ?)"));
    remove.Bind(1, d.seq).Bind(2, cjk ? CjkIndexText(d.content) : d.content);
    TMCRA_RETURN_IF_ERROR(remove.Run());
  }
  return Ok();
}

// Deletes the stem index's pairs of the forms of `doomed` that no record holds any more
// (memory/stems.h).
Status PruneStems(db::Database& db, const std::vector<Doomed>& doomed) {
  TMCRA_RETURN_IF_ERROR(
      db.Exec("CREATE VIRTUAL TABLE IF NOT EXISTS temp.records_fts_vocab USING "
              "fts5vocab(main, records_fts, 'row')"));
  TMCRA_ASSIGN_OR_RETURN(WordTokenizer tokenizer, WordTokenizer::Open(db));
  std::unordered_set<std::string> forms;
  for (const Doomed& d : doomed) {
    for (auto& t : tokenizer.Tokens(d.content)) forms.insert(std::move(t));
  }
  TMCRA_ASSIGN_OR_RETURN(const int64_t pruned, PruneForms(db, forms));
  if (pruned > 0) spdlog::debug("stem index: {} pairs of forgotten forms deleted", pruned);
  return Ok();
}

// Deletes the records' vectors and, when there were any, counts the deletion, so every
// process's copy of the vectors reads them again (memory/vectors.h).
Status DeleteVectors(db::Database& db, const std::vector<Doomed>& doomed) {
  TMCRA_ASSIGN_OR_RETURN(auto remove, db.Prepare("DELETE FROM record_vectors WHERE event_seq = ?"));
  int deleted = 0;
  for (const Doomed& d : doomed) {
    remove.Reset();
    remove.Bind(1, d.seq);
    TMCRA_RETURN_IF_ERROR(remove.Run());
    deleted += db.Changes();
  }
  if (deleted == 0) return Ok();
  return db.Exec(
      "INSERT INTO maintenance(name, value) VALUES('vector_deletions', 1) "
      "ON CONFLICT(name) DO UPDATE SET value = value + 1");
}

Status DeleteRecords(db::Database& db, const std::vector<Doomed>& doomed) {
  TMCRA_RETURN_IF_ERROR(DeleteVectors(db, doomed));
  TMCRA_ASSIGN_OR_RETURN(auto remove, db.Prepare("DELETE FROM records WHERE event_seq = ?"));
  TMCRA_ASSIGN_OR_RETURN(auto count,
                         db.Prepare("UPDATE scopes SET record_count = MAX(record_count - 1, 0), "
                                    "updated_at = ? WHERE name = ?"));
  const double now = NowSeconds();
  for (const Doomed& d : doomed) {
    TMCRA_RETURN_IF_ERROR(Unindex(db, d));
    remove.Reset();
    remove.Bind(1, d.seq);
    TMCRA_RETURN_IF_ERROR(remove.Run());
    count.Reset();
    count.Bind(1, now).Bind(2, d.scope);
    TMCRA_RETURN_IF_ERROR(count.Run());
  }
  return doomed.empty() ? Ok() : PruneStems(db, doomed);
}

// The feedback that goes with the records: its targets on them, then every feedback of the
// scope left without a target or whose request quotes the phrase. Returns how many went.
Result<int64_t> DropFeedback(db::Database& db, std::string_view scope,
                             const std::vector<Doomed>& doomed,
                             const std::optional<std::string>& match) {
  TMCRA_ASSIGN_OR_RETURN(auto target,
                         db.Prepare("DELETE FROM feedback_targets WHERE record_id = ?"));
  for (const Doomed& d : doomed) {
    target.Reset();
    target.Bind(1, d.record_id);
    TMCRA_RETURN_IF_ERROR(target.Run());
  }
  TMCRA_ASSIGN_OR_RETURN(
      auto gone,
      db.Prepare("SELECT seq FROM feedback f WHERE scope_name = ?1 AND (NOT EXISTS (SELECT 1 "
                 "FROM feedback_targets t WHERE t.feedback_seq = f.seq) OR (?2 IS NOT NULL AND "
                 "(instr(request_json, ?2) > 0 OR instr(request_json, ?3) > 0)))"));
  gone.Bind(1, scope).Bind(2, match);
  if (match) {
    gone.Bind(3, json(*match).dump().substr(1, json(*match).dump().size() - 2));
  } else {
    gone.BindNull(3);
  }
  std::vector<int64_t> seqs;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, gone.Step());
    if (!row) break;
    seqs.push_back(gone.Int(0));
  }
  for (const char* sql : {"DELETE FROM feedback_targets WHERE feedback_seq = ?",
                          "DELETE FROM feedback WHERE seq = ?"}) {
    TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare(sql));
    for (int64_t seq : seqs) {
      st.Reset();
      st.Bind(1, seq);
      TMCRA_RETURN_IF_ERROR(st.Run());
    }
  }
  return static_cast<int64_t>(seqs.size());
}

// The jobs that carried the records keep no copy: a finished job's payload is cleared (it
// usually is already), and a job of the scope not yet run whose payload holds the session or
// the phrase is failed with "forgotten", its payload cleared. Returns how many changed.
Result<int64_t> ScrubJobs(db::Database& db, std::string_view scope,
                          const std::vector<Doomed>& doomed, const ForgetSelector& s) {
  int64_t changed = 0;
  TMCRA_ASSIGN_OR_RETURN(auto finished,
                         db.Prepare("UPDATE jobs SET payload_json = NULL WHERE job_id = ? AND "
                                    "payload_json IS NOT NULL AND status NOT IN ('pending', "
                                    "'running')"));
  std::set<std::string> jobs;
  for (const Doomed& d : doomed) jobs.insert(d.job_id);
  for (const std::string& job : jobs) {
    finished.Reset();
    finished.Bind(1, job);
    TMCRA_RETURN_IF_ERROR(finished.Run());
    changed += db.Changes();
  }
  const std::string escaped = s.match ? json(*s.match).dump() : std::string();
  TMCRA_ASSIGN_OR_RETURN(
      auto unrun,
      db.Prepare("UPDATE jobs SET status = 'failed', payload_json = NULL, updated_at = ?1, "
                 "finished_at = ?1, lease_owner = NULL, lease_expires_at = NULL, error_json = "
                 "'{\"code\":\"forgotten\",\"message\":\"forgotten before it was stored\"}' "
                 "WHERE scope_name = ?2 AND status IN ('pending', 'running') AND payload_json "
                 "IS NOT NULL AND (?3 OR json_extract(payload_json, '$.session_id') = ?4 OR "
                 "instr(payload_json, ?5) > 0 OR instr(payload_json, ?6) > 0)"));
  unrun.Bind(1, NowSeconds())
      .Bind(2, scope)
      .Bind(3, static_cast<int64_t>(s.all && !s.before && !s.message_ids))
      .Bind(4, s.session_id)
      .Bind(5, s.match)
      .Bind(6, s.match ? std::optional<std::string>(escaped.substr(1, escaped.size() - 2))
                       : std::nullopt);
  TMCRA_RETURN_IF_ERROR(unrun.Run());
  return changed + db.Changes();
}

json Preview(const std::vector<Doomed>& doomed) {
  json out = json::array();
  for (size_t i = 0; i < doomed.size() && i < kPreviewRecords; ++i) {
    const Doomed& d = doomed[i];
    out.push_back({{"memory_id", d.record_id},
                   {"scope_name", d.scope},
                   {"session_id", d.session_id},
                   {"timestamp", d.timestamp},
                   {"role", d.role},
                   {"excerpt", TruncateCodePoints(d.content, kExcerptCodePoints)}});
  }
  return out;
}

Status MarkErasePending(db::Database& db, bool pending) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db.Prepare("INSERT OR REPLACE INTO maintenance(name, value) VALUES('erase_pending', "
                          "?)"));
  st.Bind(1, static_cast<int64_t>(pending));
  return st.Run();
}

Result<bool> ErasePending(db::Database& db) {
  TMCRA_ASSIGN_OR_RETURN(const int64_t pending,
                         db.QueryInt("SELECT COALESCE((SELECT value FROM maintenance WHERE name = "
                                     "'erase_pending'), 0)"));
  return pending != 0;
}

}  // namespace

Result<json> EngineImpl::ScopeStats() {
  if (options_.shared) TMCRA_RETURN_IF_ERROR(SyncReplica());
  auto reader = BorrowReader();
  if (!reader) return reader.error();
  db::Database& db = reader->db();
  TMCRA_ASSIGN_OR_RETURN(
      auto st,
      db.Prepare("SELECT s.name, COUNT(r.event_seq), COUNT(DISTINCT r.session_id), "
                 "COALESCE(SUM(length(CAST(r.content AS BLOB))), 0), MIN(r.occurred_at), "
                 "MAX(r.occurred_at), COALESCE(SUM((length(r.content) - length(replace(r.content, "
                 "'[REDACTED:', ''))) / 10), 0), (SELECT COUNT(*) FROM feedback f WHERE "
                 "f.scope_name = s.name) FROM scopes s LEFT JOIN records r ON r.scope_name = "
                 "s.name GROUP BY s.name ORDER BY s.name"));
  json scopes = json::array();
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    const auto time = [&st](int column) {
      return st.IsNull(column) ? json(nullptr) : json(FormatIsoUtc(st.Double(column)));
    };
    scopes.push_back({{"scope_name", st.Text(0)},
                      {"messages", st.Int(1)},
                      {"sessions", st.Int(2)},
                      {"bytes", st.Int(3)},
                      {"oldest", time(4)},
                      {"newest", time(5)},
                      {"redactions", st.Int(6)},
                      {"feedback", st.Int(7)}});
  }
  TMCRA_ASSIGN_OR_RETURN(const bool pending, ErasePending(db));
  return json{{"scopes", std::move(scopes)}, {"erase_pending", pending}};
}

Result<json> EngineImpl::Forget(std::string_view scope, const json& body) {
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  TMCRA_ASSIGN_OR_RETURN(const ForgetSelector selector, ValidateForget(body));
  if (options_.shared) return SharedForget(scope, selector);
  return ForgetWith(scope, selector.dry_run, [&](db::Database& db) -> Result<ForgetPlan> {
    ForgetPlan plan;
    TMCRA_ASSIGN_OR_RETURN(auto doomed, SelectDoomed(db, scope, selector));
    plan.preview = Preview(doomed);
    plan.records = static_cast<int64_t>(doomed.size());
    if (selector.dry_run) return plan;
    TMCRA_RETURN_IF_ERROR(DeleteRecords(db, doomed));
    TMCRA_ASSIGN_OR_RETURN(plan.feedback, DropFeedback(db, scope, doomed, selector.match));
    TMCRA_ASSIGN_OR_RETURN(plan.jobs, ScrubJobs(db, scope, doomed, selector));
    return plan;
  });
}

Result<json> EngineImpl::ForgetOldest(int64_t bytes) {
  // The embedded store's size cap (tmcra-mcp); tmcra-memd offers no such call.
  if (options_.shared) return NotShared("forget_oldest");
  if (bytes <= 0) return ValidationError("bytes", "should be greater than 0");
  return ForgetWith("*", false, [&](db::Database& db) -> Result<ForgetPlan> {
    ForgetPlan plan;
    TMCRA_ASSIGN_OR_RETURN(auto doomed, SelectOldest(db, bytes));
    plan.preview = Preview(doomed);
    plan.records = static_cast<int64_t>(doomed.size());
    TMCRA_RETURN_IF_ERROR(DeleteRecords(db, doomed));
    std::map<std::string, std::vector<Doomed>> by_scope;
    for (auto& d : doomed) by_scope[d.scope].push_back(std::move(d));
    ForgetSelector none;
    for (const auto& [scope, records] : by_scope) {
      TMCRA_ASSIGN_OR_RETURN(const int64_t feedback, DropFeedback(db, scope, records, {}));
      TMCRA_ASSIGN_OR_RETURN(const int64_t jobs, ScrubJobs(db, scope, records, none));
      plan.feedback += feedback;
      plan.jobs += jobs;
    }
    return plan;
  });
}

// One forget's transaction: `plan` selects and deletes on the write connection while no recall
// runs; the ranking caches are cleared (document counts and postings no longer match the
// index), and the erase follows outside the transaction.
Result<json> EngineImpl::ForgetWith(std::string_view label, bool dry_run,
                                    const std::function<Result<ForgetPlan>(db::Database&)>& plan) {
  ForgetPlan done;
  {
    ReadersPaused paused(*this);
    std::lock_guard lock(api_mu_);
    TMCRA_ASSIGN_OR_RETURN(db::Database * db, ApiDb());
    TMCRA_RETURN_IF_ERROR(db->Exec("PRAGMA secure_delete=ON"));
    TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(*db));
    TMCRA_ASSIGN_OR_RETURN(done, plan(*db));
    if (!dry_run && done.records + done.feedback + done.jobs > 0) {
      TMCRA_RETURN_IF_ERROR(MarkErasePending(*db, true));
    }
    TMCRA_RETURN_IF_ERROR(tx.Commit());
    if (!dry_run && done.records > 0) ClearRankingCaches();
  }
  json answer{{"scope_name", label},     {"dry_run", dry_run},
              {"records", done.records}, {"feedback", done.feedback},
              {"jobs", done.jobs},       {"preview", std::move(done.preview)},
              {"erase", "none"}};
  if (dry_run || done.records + done.feedback + done.jobs == 0) return answer;
  // The deletion is committed whatever the erase does: a failed erase (a busy lock) is pending,
  // retried by the worker, never the forget's failure.
  auto erased = Erase();
  if (!erased) {
    spdlog::warn("memory erase: {}", erased.error().ToString());
    answer["erase"] = "pending";
    answer["erase_note"] =
        "the erase could not run yet (" + erased.error().message + "); it is retried";
    return answer;
  }
  answer["erase"] = erased->value("erased", false) ? "done" : "pending";
  if (erased->contains("note")) answer["erase_note"] = (*erased)["note"];
  return answer;
}

void EngineImpl::ClearRankingCaches() {
  word_counts_->Clear();
  cjk_counts_->Clear();
  if (postings_) postings_->Clear();
}

Result<json> EngineImpl::Erase() {
  std::lock_guard lock(api_mu_);
  TMCRA_ASSIGN_OR_RETURN(db::Database * db, ApiDb());
  TMCRA_RETURN_IF_ERROR(db->Exec("PRAGMA secure_delete=ON"));
  for (const char* index : kIndexes) {
    TMCRA_RETURN_IF_ERROR(
        db->Exec(std::string("INSERT INTO ") + index + "(" + index + ") VALUES('optimize')"));
  }
  TMCRA_RETURN_IF_ERROR(db->Exec("VACUUM"));
  TMCRA_ASSIGN_OR_RETURN(auto checkpoint, db->Prepare("PRAGMA wal_checkpoint(TRUNCATE)"));
  TMCRA_ASSIGN_OR_RETURN(const bool row, checkpoint.Step());
  const bool busy = !row || checkpoint.Int(0) != 0;
  checkpoint.Reset();
  if (busy) {
    return json{{"erased", false},
                {"note",
                 "another process is reading the memory file, so its write-ahead log still "
                 "holds old pages; the erase is retried when it lets go (run the command again "
                 "or wait for the server's next idle moment)"}};
  }
  // The mark goes in a new write-ahead log, which a second checkpoint empties again.
  TMCRA_RETURN_IF_ERROR(MarkErasePending(*db, false));
  TMCRA_RETURN_IF_ERROR(db->Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  spdlog::info("memory erase: deleted text removed from the store's files");
  return json{{"erased", true}};
}

namespace {

constexpr size_t kMaxImportLines = 1000;

json OptionalColumn(const db::Statement& st, int column) {
  return st.IsNull(column) ? json(nullptr) : json(st.Text(column));
}

Status ExportRecords(db::Database& db, std::string_view scope,
                     const std::function<Status(const json&)>& sink) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db.Prepare("SELECT record_id, session_id, message_id, role, content, occurred_at, "
                          "timestamp, metadata_json, agent_id, target_agent_id, job_id FROM "
                          "records WHERE scope_name = ? ORDER BY event_seq"));
  st.Bind(1, scope);
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return Ok();
    json metadata = ParseJsonLenient(st.Text(7));
    TMCRA_RETURN_IF_ERROR(sink({{"type", "record"},
                                {"scope_name", scope},
                                {"memory_id", st.Text(0)},
                                {"session_id", st.Text(1)},
                                {"message_id", st.Text(2)},
                                {"role", st.Text(3)},
                                {"content", st.Text(4)},
                                {"occurred_at", st.Double(5)},
                                {"timestamp", st.Text(6)},
                                {"metadata", metadata.is_object() ? metadata : json::object()},
                                {"agent_id", OptionalColumn(st, 8)},
                                {"target_agent_id", OptionalColumn(st, 9)},
                                {"job_id", st.Text(10)}}));
  }
}

Status ExportFeedback(db::Database& db, std::string_view scope,
                      const std::function<Status(const json&)>& sink) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db.Prepare("SELECT seq, feedback_id, rating, action, idempotency_key, "
                          "payload_sha256, request_json, created_at, correction_job_id FROM "
                          "feedback WHERE scope_name = ? ORDER BY seq"));
  TMCRA_ASSIGN_OR_RETURN(auto targets,
                         db.Prepare("SELECT record_id FROM feedback_targets WHERE feedback_seq = ? "
                                    "ORDER BY position"));
  st.Bind(1, scope);
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return Ok();
    json ids = json::array();
    targets.Reset();
    targets.Bind(1, st.Int(0));
    for (;;) {
      TMCRA_ASSIGN_OR_RETURN(const bool target, targets.Step());
      if (!target) break;
      ids.push_back(targets.Text(0));
    }
    TMCRA_RETURN_IF_ERROR(sink({{"type", "feedback"},
                                {"scope_name", scope},
                                {"feedback_id", st.Text(1)},
                                {"rating", st.Text(2)},
                                {"action", st.Text(3)},
                                {"idempotency_key", OptionalColumn(st, 4)},
                                {"payload_sha256", st.Text(5)},
                                {"request", ParseJsonLenient(st.Text(6))},
                                {"created_at", st.Double(7)},
                                {"correction_job_id", OptionalColumn(st, 8)},
                                {"targets", std::move(ids)}}));
  }
}

// A stored id of ours: the prefix, then 1..64 letters, digits or '_'.
bool IsStoredId(const json& value, std::string_view prefix) {
  if (!value.is_string()) return false;
  const auto& id = value.get_ref<const std::string&>();
  if (id.size() <= prefix.size() || id.size() > prefix.size() + 64 || id.rfind(prefix, 0) != 0) {
    return false;
  }
  return std::all_of(id.begin() + static_cast<std::ptrdiff_t>(prefix.size()), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsIdText(const json& value) {
  if (!value.is_string()) return false;
  const auto& text = value.get_ref<const std::string&>();
  return !text.empty() && IsValidUtf8(text) && CodePointLength(text) <= kMaxIdChars;
}

bool IsOptionalText(const json& line, const char* key) {
  auto it = line.find(key);
  return it == line.end() || it->is_null() ||
         (it->is_string() && IsValidUtf8(it->get<std::string>()));
}

// Why an export line cannot be imported ("" when it can), naming the field.
std::string RecordLineProblem(const json& line) {
  if (!IsStoredId(line.value("memory_id", json()), "rec_")) return "memory_id";
  if (!IsIdText(line.value("session_id", json()))) return "session_id";
  if (!IsIdText(line.value("message_id", json()))) return "message_id";
  for (const char* key : {"role", "content", "timestamp", "job_id"}) {
    auto it = line.find(key);
    if (it == line.end() || !it->is_string() || !IsValidUtf8(it->get<std::string>())) return key;
  }
  if (!line.value("occurred_at", json()).is_number()) return "occurred_at";
  if (!line.value("metadata", json()).is_object()) return "metadata";
  if (!IsOptionalText(line, "agent_id")) return "agent_id";
  if (!IsOptionalText(line, "target_agent_id")) return "target_agent_id";
  return "";
}

std::string FeedbackLineProblem(const json& line) {
  if (!IsStoredId(line.value("feedback_id", json()), "fb_")) return "feedback_id";
  for (const char* key : {"rating", "action", "payload_sha256"}) {
    auto it = line.find(key);
    if (it == line.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
      return key;
  }
  if (!line.value("request", json()).is_object()) return "request";
  if (!line.value("created_at", json()).is_number()) return "created_at";
  if (!IsOptionalText(line, "idempotency_key")) return "idempotency_key";
  if (!IsOptionalText(line, "correction_job_id")) return "correction_job_id";
  const json targets = line.value("targets", json());
  // A note may target nothing; every other action targets a record.
  if (!targets.is_array() || (targets.empty() && line["action"] != "note") ||
      !std::all_of(targets.begin(), targets.end(),
                   [](const json& t) { return IsStoredId(t, "rec_"); })) {
    return "targets";
  }
  return "";
}

Status ValidateImport(const json& lines) {
  if (!lines.is_array() || lines.empty() || lines.size() > kMaxImportLines) {
    return ValidationError("lines", "Input should be a list of 1 to 1000 export lines",
                           "list_type");
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& line = lines[i];
    const std::string at = "lines." + std::to_string(i);
    if (!line.is_object()) return ValidationError(at, "should be an object", "dict_type");
    const auto type_field = line.find("type");
    const std::string type = type_field != line.end() && type_field->is_string()
                                 ? type_field->get<std::string>()
                                 : std::string();
    std::string problem;
    if (type == "record") {
      problem = RecordLineProblem(line);
    } else if (type == "feedback") {
      problem = FeedbackLineProblem(line);
    } else {
      problem = "type";
    }
    if (!problem.empty()) {
      return ValidationError(at + "." + problem, "missing or not valid for a " +
                                                     (type.empty() ? "line" : type) + " line");
    }
  }
  return Ok();
}

json NullableText(const json& line, const char* key) {
  auto it = line.find(key);
  return it == line.end() ? json(nullptr) : *it;
}

void BindNullable(db::Statement& st, int index, const json& value) {
  if (value.is_string()) {
    st.Bind(index, value.get_ref<const std::string&>());
  } else {
    st.BindNull(index);
  }
}

}  // namespace

Status EngineImpl::Export(std::string_view scope,
                          const std::function<Status(const json& line)>& sink) {
  if (options_.shared) TMCRA_RETURN_IF_ERROR(SyncReplica());
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  auto reader = BorrowReader();
  if (!reader) return reader.error();
  db::Database& db = reader->db();
  // One snapshot for the whole export.
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Deferred(db));
  TMCRA_RETURN_IF_ERROR(ExportRecords(db, scope, sink));
  TMCRA_RETURN_IF_ERROR(ExportFeedback(db, scope, sink));
  return tx.Commit();
}

// An imported record, written as a job writes one; false when its id or its message is held.
Result<bool> EngineImpl::ImportRecord(db::Database& db, std::string_view scope, const json& line) {
  const std::string content = filter_.Apply(line["content"].get<std::string>()).text;
  if (content.empty()) return false;
  TMCRA_ASSIGN_OR_RETURN(
      auto insert,
      db.Prepare("INSERT OR IGNORE INTO records(record_id, scope_name, session_id, message_id, "
                 "role, content, occurred_at, timestamp, metadata_json, agent_id, "
                 "target_agent_id, job_id) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(1, line["memory_id"].get<std::string>())
      .Bind(2, scope)
      .Bind(3, line["session_id"].get<std::string>())
      .Bind(4, line["message_id"].get<std::string>())
      .Bind(5, line["role"].get<std::string>())
      .Bind(6, content)
      .Bind(7, line["occurred_at"].get<double>())
      .Bind(8, line["timestamp"].get<std::string>())
      .Bind(9, CanonicalJson(line["metadata"]))
      .Bind(12, line["job_id"].get<std::string>());
  BindNullable(insert, 10, NullableText(line, "agent_id"));
  BindNullable(insert, 11, NullableText(line, "target_agent_id"));
  TMCRA_RETURN_IF_ERROR(insert.Run());
  if (db.Changes() == 0) return false;
  const int64_t seq = db.LastInsertRowId();
  // The word index, and the trigram index for text with non-ASCII characters, as a job does;
  // the CJK index is filled by its back-fill (RepairCjkIndex) after the import.
  const bool non_ascii =
      std::any_of(content.begin(), content.end(), [](char c) { return (c & 0x80) != 0; });
  for (const char* index : {"records_fts", "records_tri"}) {
    if (std::string_view(index) == "records_tri" && !non_ascii) continue;
    TMCRA_ASSIGN_OR_RETURN(auto add, db.Prepare(std::string("INSERT INTO ") + index +
                                                "(rowid, content) VALUES(?, ?)"));
    add.Bind(1, seq).Bind(2, content);
    TMCRA_RETURN_IF_ERROR(add.Run());
  }
  TMCRA_ASSIGN_OR_RETURN(
      auto count,
      db.Prepare("INSERT INTO scopes(name, record_count, last_event_seq, created_at, updated_at) "
                 "VALUES(?1, 1, ?2, ?3, ?3) ON CONFLICT(name) DO UPDATE SET record_count = "
                 "record_count + 1, last_event_seq = MAX(COALESCE(last_event_seq, 0), ?2), "
                 "updated_at = ?3"));
  count.Bind(1, scope).Bind(2, seq).Bind(3, NowSeconds());
  TMCRA_RETURN_IF_ERROR(count.Run());
  return true;
}

namespace {

// An export's feedback line as the row a store keeps, in `scope` of `tenant`.
SharedStore::FeedbackRow FeedbackRowOf(const std::string& tenant, std::string_view scope,
                                       const json& line) {
  const auto optional_text = [&line](const char* key) -> std::optional<std::string> {
    const json value = NullableText(line, key);
    return value.is_string() ? std::optional<std::string>(value.get<std::string>()) : std::nullopt;
  };
  SharedStore::FeedbackRow f;
  f.feedback_id = line["feedback_id"].get<std::string>();
  f.tenant_id = tenant;
  f.scope_name = std::string(scope);
  f.rating = line["rating"].get<std::string>();
  f.action = line["action"].get<std::string>();
  f.idempotency_key = optional_text("idempotency_key");
  f.payload_sha256 = line["payload_sha256"].get<std::string>();
  f.request_json = CanonicalJson(line["request"]);
  f.created_at = line["created_at"].get<double>();
  f.correction_job_id = optional_text("correction_job_id");
  for (const json& id : line["targets"]) f.targets.push_back(id.get<std::string>());
  return f;
}

}  // namespace

Result<json> EngineImpl::Import(std::string_view scope, const json& lines) {
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  TMCRA_RETURN_IF_ERROR(ValidateImport(lines));
  if (options_.shared) return SharedImport(scope, lines);
  int64_t records_added = 0, records_present = 0, feedback_added = 0, feedback_present = 0;
  {
    std::lock_guard lock(api_mu_);
    TMCRA_ASSIGN_OR_RETURN(db::Database * db, ApiDb());
    TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(*db));
    for (const json& line : lines) {
      if (line["type"] == "record") {
        TMCRA_ASSIGN_OR_RETURN(const bool added, ImportRecord(*db, scope, line));
        ++(added ? records_added : records_present);
      } else {
        TMCRA_ASSIGN_OR_RETURN(
            const bool added,
            AddSharedFeedback(*db, FeedbackRowOf(options_.tenant_id, scope, line)));
        ++(added ? feedback_added : feedback_present);
      }
    }
    TMCRA_RETURN_IF_ERROR(tx.Commit());
    index_writes_.fetch_add(1);
    for (;;) {  // the CJK and stem indexes' back-fills, for the imported records
      TMCRA_ASSIGN_OR_RETURN(const bool more, RepairCjkIndex(*db));
      if (!more) break;
    }
    for (;;) {
      TMCRA_ASSIGN_OR_RETURN(const bool more, RepairStemIndex(*db));
      if (!more) break;
    }
  }
  return json{{"records_added", records_added},
              {"records_present", records_present},
              {"feedback_added", feedback_added},
              {"feedback_present", feedback_present}};
}

void EngineImpl::EraseWhenPending(db::Database& db) {
  auto pending = ErasePending(db);
  if (!pending || !*pending) return;
  if (auto erased = Erase(); !erased) {
    spdlog::warn("memory erase: {}", erased.error().ToString());
  } else if (!erased->value("erased", false)) {
    spdlog::info("memory erase: still pending (another process is reading the file)");
  }
}

Status EngineImpl::ApplySharedDeletions(db::Database& db, const std::vector<int64_t>& seqs,
                                        const std::vector<std::string>& feedback_ids) {
  TMCRA_RETURN_IF_ERROR(db.Exec("PRAGMA secure_delete=ON"));
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare(std::string(kDoomedColumns) + "WHERE event_seq = ?"));
  TMCRA_ASSIGN_OR_RETURN(auto targets,
                         db.Prepare("DELETE FROM feedback_targets WHERE record_id = ?"));
  std::vector<Doomed> doomed;
  for (const int64_t seq : seqs) {
    st.Reset();
    st.Bind(1, seq);
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) continue;
    doomed.push_back(ReadDoomed(st));
    targets.Reset();
    targets.Bind(1, doomed.back().record_id);
    TMCRA_RETURN_IF_ERROR(targets.Run());
  }
  TMCRA_RETURN_IF_ERROR(DeleteRecords(db, doomed));
  for (const std::string& id : feedback_ids) TMCRA_RETURN_IF_ERROR(DeleteSharedFeedback(db, id));
  return doomed.empty() && feedback_ids.empty() ? Ok() : MarkErasePending(db, true);
}

namespace {

// An export's line as a shared store imports it, its record's text filtered; nullopt for a
// record left without text.
std::optional<SharedStore::ImportLine> SharedImportLine(const filter::ContentFilter& filter,
                                                        const std::string& tenant,
                                                        std::string_view scope, const json& line) {
  SharedStore::ImportLine out;
  const auto text = [&line](const char* key) { return line[key].get<std::string>(); };
  const auto optional_text = [&line](const char* key) -> std::optional<std::string> {
    const json value = NullableText(line, key);
    return value.is_string() ? std::optional<std::string>(value.get<std::string>()) : std::nullopt;
  };
  out.is_record = line["type"] == "record";
  if (!out.is_record) {
    out.feedback = FeedbackRowOf(tenant, scope, line);
    return out;
  }
  SharedStore::NewRecord& r = out.record;
  r.content = filter.Apply(text("content")).text;
  if (r.content.empty()) return std::nullopt;
  out.job_id = text("job_id");
  r.record_id = text("memory_id");
  r.session_id = text("session_id");
  r.message_id = text("message_id");
  r.role = text("role");
  r.occurred_at = line["occurred_at"].get<double>();
  r.timestamp = text("timestamp");
  r.metadata_json = CanonicalJson(line["metadata"]);
  r.agent_id = optional_text("agent_id");
  r.target_agent_id = optional_text("target_agent_id");
  return out;
}

}  // namespace

Result<json> EngineImpl::SharedImport(std::string_view scope, const json& lines) {
  std::vector<SharedStore::ImportLine> kept;
  int64_t emptied = 0;  // records the filter left without text: counted as present, as here
  for (size_t i = 0; i < lines.size(); ++i) {
    // PostgreSQL text cannot hold U+0000.
    if (CanonicalJsonHoldsNul(CanonicalJson(lines[i]))) {
      return ValidationError("lines." + std::to_string(i),
                             "U+0000 (NUL) cannot be stored in a PostgreSQL memory store");
    }
    auto line = SharedImportLine(filter_, options_.tenant_id, scope, lines[i]);
    if (line) {
      kept.push_back(std::move(*line));
    } else {
      ++emptied;
    }
  }
  TMCRA_ASSIGN_OR_RETURN(const auto imported, options_.shared->Import(scope, kept));
  if (auto synced = SyncReplica(); !synced) {
    spdlog::warn("memory import: this index is brought up to date later: {}",
                 synced.error().ToString());
  }
  return json{{"records_added", imported.records_added},
              {"records_present", imported.records_present + emptied},
              {"feedback_added", imported.feedback_added},
              {"feedback_present", imported.feedback_present}};
}

Result<json> EngineImpl::SharedForget(std::string_view scope, const ForgetSelector& selector) {
  TMCRA_ASSIGN_OR_RETURN(const auto forgotten, options_.shared->Forget(scope, selector));
  const auto records = static_cast<int64_t>(forgotten.records.size());
  json answer{{"scope_name", scope},    {"dry_run", selector.dry_run},
              {"records", records},     {"feedback", forgotten.feedback},
              {"jobs", forgotten.jobs}, {"preview", Preview(forgotten.records)},
              {"erase", "none"}};
  if (selector.dry_run || records + forgotten.feedback + forgotten.jobs == 0) return answer;
  // The store has deleted and vacuumed; this index applies the deletions from the feed and is
  // erased (every other instance's is when its worker next runs).
  std::vector<std::string> pending;
  if (!forgotten.vacuumed) {
    pending.push_back("PostgreSQL's VACUUM did not run (" + forgotten.vacuum_error +
                      "); autovacuum reclaims the rows later");
  }
  if (auto synced = SyncReplica(); !synced) {
    pending.push_back("this instance's index applies the deletions once the store answers (" +
                      synced.error().message + ")");
  } else if (auto erased = Erase(); !erased) {
    pending.push_back("the index's erase could not run yet (" + erased.error().message +
                      "); it is retried");
  } else if (!erased->value("erased", false)) {
    pending.push_back(erased->value("note", std::string("the index's erase is retried")));
  }
  answer["erase"] = pending.empty() ? "done" : "pending";
  if (!pending.empty()) {
    std::string note;
    for (const std::string& p : pending) note += (note.empty() ? "" : "; ") + p;
    answer["erase_note"] = note;
  }
  return answer;
}

}  // namespace tmcra::memory
