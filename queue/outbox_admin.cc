// The outbox's maintenance calls: its part of a forget and of retention, and its figures per
// scope (queue/outbox.h, queue/README.md "Forget").

#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/json_reader.h"
#include "queue/outbox.h"

namespace tmcra::queue {

namespace {

// Epoch seconds in the outbox's time format (NowIsoformat), so that texts compare as times.
std::string Isoformat(double epoch_seconds) {
  std::string utc = FormatIsoUtc(epoch_seconds);
  utc.pop_back();
  if (utc.find('.') == std::string::npos) utc += ".000000";
  return utc + "+00:00";
}

// `phrase` as a JSON string's inside: how it appears in a stored JSON text.
std::string JsonEscaped(const std::string& phrase) {
  const std::string quoted = json(phrase).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// The WHERE clause both tables share: ?1 scope, ?2 session, ?3 turn's item or turn id, ?4 before,
// ?5 phrase, ?6 phrase as JSON, ?7 all; `text` is the column holding the user's words.
std::string Matching(const char* id_column, const char* text) {
  return std::string("scope_name = ?1 AND (?2 IS NULL OR session_id = ?2) AND (?3 IS NULL OR ") +
         id_column + " = ?3) AND (?4 IS NULL OR created_at < ?4) AND (?5 IS NULL OR instr(" + text +
         ", ?5) > 0 OR instr(" + text + ", ?6) > 0) AND (?7 OR ?2 IS NOT NULL OR ?3 IS " +
         "NOT NULL OR ?4 IS NOT NULL OR ?5 IS NOT NULL)";
}

void BindSelection(db::Statement& st, const ForgetSelection& s,
                   const std::optional<std::string>& id) {
  st.Bind(1, s.scope).Bind(2, s.session_id).Bind(3, id).Bind(5, s.match);
  if (s.before) {
    st.Bind(4, Isoformat(*s.before));
  } else {
    st.BindNull(4);
  }
  st.Bind(6, s.match ? std::optional<std::string>(JsonEscaped(*s.match)) : std::nullopt);
  st.Bind(7, static_cast<int64_t>(s.all));
}

Result<int64_t> Count(db::Database& db, const std::string& sql, const ForgetSelection& s,
                      const std::optional<std::string>& id) {
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare(sql));
  BindSelection(st, s, id);
  TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
  return row ? st.Int(0) : 0;
}

Result<int64_t> Run(db::Database& db, const std::string& sql, const ForgetSelection& s,
                    const std::optional<std::string>& id) {
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare(sql));
  BindSelection(st, s, id);
  TMCRA_RETURN_IF_ERROR(st.Run());
  return static_cast<int64_t>(db.Changes());
}

// Clears the recall receipts that quote the phrase in rows that stay: an item keeps only its
// write gate's input ("_local_capture") when that does not quote it; a turn keeps
// {"pruned": true}, as a delivered turn does.
Result<int64_t> PruneReceipts(db::Database& db, const std::string& phrase) {
  const std::string escaped = JsonEscaped(phrase);
  TMCRA_ASSIGN_OR_RETURN(
      auto items,
      db.Prepare("UPDATE ingest_queue SET recall_receipt_json = CASE WHEN "
                 "json_valid(recall_receipt_json) AND json_type(recall_receipt_json, "
                 "'$._local_capture') IS NOT NULL AND instr(recall_receipt_json -> "
                 "'$._local_capture', ?1) = 0 AND instr(recall_receipt_json -> '$._local_capture', "
                 "?2) = 0 THEN json_object('_local_capture', json(recall_receipt_json -> "
                 "'$._local_capture')) END WHERE instr(recall_receipt_json, ?1) > 0 OR "
                 "instr(recall_receipt_json, ?2) > 0"));
  items.Bind(1, phrase).Bind(2, escaped);
  TMCRA_RETURN_IF_ERROR(items.Run());
  int64_t pruned = db.Changes();
  TMCRA_ASSIGN_OR_RETURN(
      auto turns, db.Prepare("UPDATE prepared_turns SET recall_receipt_json = "
                             "'{\"pruned\":true}' WHERE instr(recall_receipt_json, ?1) > 0 OR "
                             "instr(recall_receipt_json, ?2) > 0"));
  turns.Bind(1, phrase).Bind(2, escaped);
  TMCRA_RETURN_IF_ERROR(turns.Run());
  return pruned + db.Changes();
}

// Erases freed bytes: the file vacuumed with secure_delete on, then the write-ahead log
// checkpointed and truncated. "pending" when another process's reader held the checkpoint back.
Result<std::string> EraseFreed(db::Database& db) {
  TMCRA_RETURN_IF_ERROR(db.Exec("PRAGMA secure_delete=ON"));
  TMCRA_RETURN_IF_ERROR(db.Exec("VACUUM"));
  TMCRA_ASSIGN_OR_RETURN(auto checkpoint, db.Prepare("PRAGMA wal_checkpoint(TRUNCATE)"));
  TMCRA_ASSIGN_OR_RETURN(const bool row, checkpoint.Step());
  const bool busy = !row || checkpoint.Int(0) != 0;
  checkpoint.Reset();
  return std::string(busy ? "pending" : "done");
}

}  // namespace

json ForgetCounts::ToJson() const {
  return json{{"items", items}, {"pending_items", pending_items},
              {"turns", turns}, {"receipts", receipts},
              {"notes", notes}, {"erase", erase}};
}

Result<ForgetCounts> Outbox::Forget(const ForgetSelection& s) {
  std::lock_guard lock(mu_);
  std::optional<std::string> item_id;
  if (s.turn_id) {
    TMCRA_ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT item_id FROM prepared_turns WHERE "
                                                 "turn_id = ?"));
    st.Bind(1, *s.turn_id);
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    // A turn not committed has no item: a value no item has.
    item_id = row && !st.IsNull(0) ? st.Text(0) : std::string("\x01");
  }
  const std::string items_where = Matching("item_id", "messages_json");
  const std::string turns_where = Matching("turn_id", "user_content");
  ForgetCounts counts;
  TMCRA_RETURN_IF_ERROR(db_->Exec("PRAGMA secure_delete=ON"));
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(*db_));
  TMCRA_ASSIGN_OR_RETURN(
      counts.items,
      Count(*db_, "SELECT COUNT(*) FROM ingest_queue WHERE " + items_where, s, item_id));
  TMCRA_ASSIGN_OR_RETURN(
      counts.pending_items,
      Count(*db_,
            "SELECT COUNT(*) FROM ingest_queue WHERE state IN ('pending', 'submitted') AND " +
                items_where,
            s, item_id));
  TMCRA_ASSIGN_OR_RETURN(
      counts.turns,
      Count(*db_, "SELECT COUNT(*) FROM prepared_turns WHERE " + turns_where, s, s.turn_id));
  if (s.dry_run) return counts;
  TMCRA_RETURN_IF_ERROR(Run(*db_, "DELETE FROM ingest_queue WHERE " + items_where, s, item_id));
  TMCRA_RETURN_IF_ERROR(Run(*db_, "DELETE FROM prepared_turns WHERE " + turns_where, s, s.turn_id));
  if (s.match) {
    TMCRA_ASSIGN_OR_RETURN(counts.receipts, PruneReceipts(*db_, *s.match));
  }
  if (s.session_id) {
    TMCRA_ASSIGN_OR_RETURN(auto given,
                           db_->Prepare("DELETE FROM session_injected WHERE session_id = ?"));
    given.Bind(1, *s.session_id);
    TMCRA_RETURN_IF_ERROR(given.Run());
  }
  // The last recall quotes memory and prompts: it goes with any forget.
  TMCRA_RETURN_IF_ERROR(db_->Exec("DELETE FROM notes"));
  counts.notes = db_->Changes();
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  // The deletion is committed: an erase that cannot run now is pending, not the call's failure.
  auto erased = EraseFreed(*db_);
  counts.erase = erased ? *erased : std::string("pending");
  return counts;
}

Result<TurnMessages> Outbox::TurnMessageIds(const std::string& turn_id) {
  std::lock_guard lock(mu_);
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db_->Prepare("SELECT t.scope_name, t.session_id, t.user_message_id, "
                            "q.messages_json FROM prepared_turns t LEFT JOIN ingest_queue q ON "
                            "q.item_id = t.item_id WHERE t.turn_id = ?"));
  st.Bind(1, turn_id);
  TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
  if (!row) return Error::NotFound("turn '" + turn_id + "' is not in this machine's outbox");
  TurnMessages turn{st.Text(0), st.Text(1), {st.Text(2)}};
  if (!st.IsNull(3)) {
    const json messages = ParseJsonLenient(st.Text(3));
    if (messages.is_array()) {
      for (const json& m : messages) {
        const std::string id = m.is_object() ? m.value("message_id", "") : "";
        if (!id.empty() && id != turn.message_ids.front()) turn.message_ids.push_back(id);
      }
    }
  }
  return turn;
}

Result<int64_t> Outbox::DropDeliveredBefore(double before) {
  std::lock_guard lock(mu_);
  const std::string cutoff = Isoformat(before);
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(*db_));
  int64_t dropped = 0;
  for (const char* sql :
       {"DELETE FROM ingest_queue WHERE state = 'succeeded' AND created_at < ?",
        "DELETE FROM prepared_turns WHERE state = 'committed' AND created_at < ? AND (item_id IS "
        "NULL OR item_id NOT IN (SELECT item_id FROM ingest_queue WHERE state <> 'succeeded'))"}) {
    TMCRA_ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
    st.Bind(1, cutoff);
    TMCRA_RETURN_IF_ERROR(st.Run());
    dropped += db_->Changes();
  }
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return dropped;
}

Result<std::string> Outbox::Compact() {
  std::lock_guard lock(mu_);
  return EraseFreed(*db_);
}

Result<std::map<std::string, ScopeCounts>> Outbox::CountsByScope() {
  std::lock_guard lock(mu_);
  TMCRA_ASSIGN_OR_RETURN(
      auto st, db_->Prepare("SELECT scope_name, SUM(state IN ('pending', 'submitted')), "
                            "SUM(state = 'dead_letter') FROM ingest_queue GROUP BY scope_name"));
  std::map<std::string, ScopeCounts> out;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return out;
    out[st.Text(0)] = ScopeCounts{st.Int(1), st.Int(2)};
  }
}

Result<int64_t> Outbox::LiveBytes() {
  std::lock_guard lock(mu_);
  return db_->QueryInt(
      "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count, "
      "pragma_freelist_count, pragma_page_size");
}

int64_t Outbox::FileBytes() const {
  int64_t bytes = 0;
  for (const std::string& file : {db_->path(), db_->path() + "-wal"}) {
    struct stat st {};
    if (stat(file.c_str(), &st) == 0) bytes += static_cast<int64_t>(st.st_size);
  }
  return bytes;
}

}  // namespace tmcra::queue
