#include "queue/outbox.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/failpoint.h"
#include "base/ids.h"
#include "base/json_reader.h"
#include "base/process_owner.h"

namespace tmcra::queue {

namespace {

// TMCRA's schema, created as its client creates it (so a file it wrote opens unchanged), then
// our additions. Each entry moves user_version from its index to index + 1.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS ingest_queue (
  item_id TEXT PRIMARY KEY,
  scope_name TEXT NOT NULL,
  session_id TEXT NOT NULL,
  messages_json TEXT NOT NULL,
  consistency TEXT NOT NULL,
  slow_policy TEXT NOT NULL,
  idempotency_key TEXT NOT NULL UNIQUE,
  metadata_json TEXT NOT NULL,
  agent_id TEXT,
  recall_receipt_json TEXT,
  state TEXT NOT NULL CHECK(state IN ('pending','submitted','succeeded','dead_letter')),
  attempts INTEGER NOT NULL DEFAULT 0,
  receipt_json TEXT,
  last_error TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_ingest_queue_recovery ON ingest_queue(state, updated_at);
CREATE TABLE IF NOT EXISTS prepared_turns (
  turn_id TEXT PRIMARY KEY,
  scope_name TEXT NOT NULL,
  session_id TEXT NOT NULL,
  user_message_id TEXT NOT NULL,
  user_content TEXT NOT NULL,
  user_timestamp TEXT NOT NULL,
  recall_receipt_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('prepared','committed')),
  item_id TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL);
)sql",
    R"sql(
ALTER TABLE ingest_queue ADD COLUMN next_attempt_at REAL NOT NULL DEFAULT 0;
ALTER TABLE ingest_queue ADD COLUMN claim_owner TEXT;
ALTER TABLE ingest_queue ADD COLUMN claim_expires_at REAL;
CREATE TABLE IF NOT EXISTS delivery_lease (
  id INTEGER PRIMARY KEY CHECK(id = 1),
  holder TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires_at REAL NOT NULL);
)sql",
    R"sql(
CREATE INDEX IF NOT EXISTS prepared_turns_by_session ON prepared_turns(session_id);
CREATE INDEX IF NOT EXISTS prepared_turns_by_scope ON prepared_turns(scope_name);
CREATE TABLE IF NOT EXISTS session_injected (
  session_id TEXT NOT NULL,
  given_key TEXT NOT NULL,
  PRIMARY KEY(session_id, given_key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS notes (
  name TEXT PRIMARY KEY,
  value_json TEXT NOT NULL) WITHOUT ROWID;
)sql",
};

Status Migrate(db::Database& db) { return db::Migrate(db, kMigrations, "the outbox"); }

json ParseOr(const std::string& text, const json& fallback) {
  json value = ParseJsonLenient(text);
  return value.is_discarded() ? fallback : value;
}

constexpr const char* kItemColumns =
    "item_id, scope_name, session_id, messages_json, consistency, slow_policy, idempotency_key, "
    "metadata_json, agent_id, recall_receipt_json, state, attempts, receipt_json, last_error, "
    "created_at, updated_at, next_attempt_at";

// The same, with the recall receipt reduced to {"_local_capture": ...} (or NULL when it has
// none): all that delivery reads of it.
constexpr const char* kDeliveryColumns =
    "item_id, scope_name, session_id, messages_json, consistency, slow_policy, idempotency_key, "
    "metadata_json, agent_id, "
    "CASE WHEN json_valid(recall_receipt_json) "
    "AND json_type(recall_receipt_json, '$._local_capture') IS NOT NULL "
    "THEN json_object('_local_capture', json(recall_receipt_json -> '$._local_capture')) END, "
    "state, attempts, receipt_json, last_error, created_at, updated_at, next_attempt_at";

Item ReadItem(const db::Statement& st) {
  Item item;
  item.item_id = st.Text(0);
  item.scope_name = st.Text(1);
  item.session_id = st.Text(2);
  item.messages = ParseOr(st.Text(3), json::array());
  item.consistency = st.Text(4);
  item.slow_policy = st.Text(5);
  item.idempotency_key = st.Text(6);
  item.metadata = ParseOr(st.Text(7), json::object());
  if (!st.IsNull(8)) item.agent_id = st.Text(8);
  item.recall_receipt = st.IsNull(9) ? json(nullptr) : ParseOr(st.Text(9), nullptr);
  item.state = st.Text(10);
  item.attempts = st.Int(11);
  item.receipt = st.IsNull(12) ? json(nullptr) : ParseOr(st.Text(12), nullptr);
  if (!st.IsNull(13)) item.last_error = st.Text(13);
  item.created_at = st.Text(14);
  item.updated_at = st.Text(15);
  item.next_attempt_at = st.Double(16);
  return item;
}

std::string Truncate(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max);
}

std::optional<double> Seconds(const std::string& iso) { return ParseIsoTimestamp(iso); }

// A message's member `key` when it is a string, else "".
std::string MessageText(const json& message, const char* key) {
  if (!message.is_object()) return {};
  auto it = message.find(key);
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Whether two commits of one turn carry the same answer: the same messages, in order, with the
// same ids, roles and text. Timestamps, metadata and the key may differ on a retry (without
// assistant_timestamp a retry gets a new timestamp, and so a new derived key).
bool SameAnswer(const json& stored, const json& requested) {
  if (!stored.is_array() || !requested.is_array() || stored.size() != requested.size()) {
    return false;
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    for (const char* key : {"message_id", "role", "content"}) {
      if (MessageText(stored[i], key) != MessageText(requested[i], key)) return false;
    }
  }
  return true;
}

// The id of the assistant message among `messages` (the last message's when none has that role).
std::string AssistantMessageId(const json& messages) {
  if (!messages.is_array() || messages.empty()) return {};
  for (const auto& m : messages) {
    if (MessageText(m, "role") == "assistant") return MessageText(m, "message_id");
  }
  return MessageText(messages.back(), "message_id");
}

std::string Quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A commit of the committed turn `turn_id`, whose item is `item_id`: a replay (the same answer)
// gets the item; another answer is a conflict, whatever state the item is in. An item whose
// content was discarded (the memory mode changed) is returned as it is: nothing is left to
// compare, and its receipt says that nothing was saved.
Result<std::string> CommittedItem(db::Database& db, const CommitRequest& request,
                                  const std::string& item_id) {
  auto st = db.Prepare("SELECT messages_json FROM ingest_queue WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, item_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return Error::Internal("committed turn has no durable queue item");
  const json stored = ParseOr(st->Text(0), nullptr);
  if ((stored.is_array() && stored.empty()) || SameAnswer(stored, request.messages)) {
    return item_id;
  }
  return Error::Conflict("turn " + request.turn_id +
                         " already has a committed answer (assistant "
                         "message " +
                         Quoted(AssistantMessageId(stored)) +
                         "); a different "
                         "assistant message (" +
                         Quoted(AssistantMessageId(request.messages)) +
                         ") cannot be committed for it");
}

}  // namespace

std::string NowIsoformat() {
  std::string utc = FormatIsoUtc(NowSeconds());  // ...[.ffffff]Z
  utc.pop_back();
  if (utc.find('.') == std::string::npos) utc += ".000000";
  return utc + "+00:00";
}

json Counts::StatesJson() const {
  return json{{"pending", pending},
              {"submitted", submitted},
              {"succeeded", succeeded},
              {"dead_letter", dead_letter}};
}

json Counts::ToJson() const {
  json out = StatesJson();
  out["oldest_pending_seconds"] = oldest_pending_seconds
                                      ? json(std::round(*oldest_pending_seconds * 1000) / 1000)
                                      : json(nullptr);
  out["last_error"] = last_error ? json(*last_error) : json(nullptr);
  return out;
}

Result<std::unique_ptr<Outbox>> Outbox::Open(const std::string& path) {
  auto db = db::Database::Open({path});
  if (!db) return db.error();
  if (auto s = Migrate(**db); !s) return s.error();
  return std::unique_ptr<Outbox>(new Outbox(std::move(*db)));
}

Result<std::string> Outbox::Enqueue(const Item& item) {
  const std::string messages = CanonicalJson(item.messages);
  std::lock_guard lock(mu_);
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  auto existing = db_->Prepare(
      "SELECT item_id, scope_name, session_id, messages_json FROM ingest_queue "
      "WHERE idempotency_key = ?");
  if (!existing) return existing.error();
  existing->Bind(1, item.idempotency_key);
  auto found = existing->Step();
  if (!found) return found.error();
  if (*found) {
    if (existing->Text(1) == item.scope_name && existing->Text(2) == item.session_id &&
        existing->Text(3) == messages) {
      return existing->Text(0);
    }
    return Error::Conflict("idempotency key is already bound to a different ingest");
  }
  const std::string item_id = item.item_id.empty() ? [] {
    std::string hex;
    for (char c : UuidV4()) {
      if (c != '-') hex.push_back(c);
    }
    return "mcp-item-" + hex;
  }()
                                                   : item.item_id;
  const std::string now = NowIsoformat();
  auto insert = db_->Prepare(
      "INSERT INTO ingest_queue(item_id, scope_name, session_id, messages_json, consistency, "
      "slow_policy, idempotency_key, metadata_json, agent_id, recall_receipt_json, state, "
      "attempts, created_at, updated_at, next_attempt_at) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, 0)");
  if (!insert) return insert.error();
  insert->Bind(1, item_id)
      .Bind(2, item.scope_name)
      .Bind(3, item.session_id)
      .Bind(4, messages)
      .Bind(5, item.consistency)
      .Bind(6, item.slow_policy)
      .Bind(7, item.idempotency_key)
      .Bind(8, CanonicalJson(item.metadata))
      .Bind(9, item.agent_id);
  if (item.recall_receipt.is_null()) {
    insert->BindNull(10);
  } else {
    insert->Bind(10, CanonicalJson(item.recall_receipt));
  }
  insert->Bind(11, now).Bind(12, now);
  if (auto s = insert->Run(); !s) return s.error();
  TMCRA_FAILPOINT("enqueue.after_insert_before_commit");
  if (auto s = tx->Commit(); !s) return s.error();
  return item_id;
}

Result<std::optional<PreparedTurn>> Outbox::GetTurn(const std::string& turn_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT turn_id, scope_name, session_id, user_message_id, user_content, user_timestamp, "
      "recall_receipt_json, state, item_id FROM prepared_turns WHERE turn_id = ?");
  if (!st) return st.error();
  st->Bind(1, turn_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<PreparedTurn>();
  PreparedTurn t;
  t.turn_id = st->Text(0);
  t.scope_name = st->Text(1);
  t.session_id = st->Text(2);
  t.user_message_id = st->Text(3);
  t.user_content = st->Text(4);
  t.user_timestamp = st->Text(5);
  t.recall_receipt = ParseOr(st->Text(6), nullptr);
  t.state = st->Text(7);
  if (!st->IsNull(8)) t.item_id = st->Text(8);
  return std::optional<PreparedTurn>(std::move(t));
}

Result<SessionTurns> Outbox::GetSessionTurns(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT count(*), (SELECT turn_id FROM prepared_turns WHERE session_id = ?1 "
      "ORDER BY rowid DESC LIMIT 1) FROM prepared_turns WHERE session_id = ?1");
  if (!st) return st.error();
  st->Bind(1, session_id);
  auto row = st->Step();
  if (!row) return row.error();
  SessionTurns out;
  if (*row) {
    out.count = st->Int(0);
    if (!st->IsNull(1)) out.latest_turn_id = st->Text(1);
  }
  return out;
}

Result<std::vector<PreparedTurn>> Outbox::ListSessionTurns(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT turn_id, user_content, state FROM prepared_turns WHERE session_id = ? "
      "ORDER BY rowid");
  if (!st) return st.error();
  st->Bind(1, session_id);
  std::vector<PreparedTurn> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) break;
    PreparedTurn t;
    t.turn_id = st->Text(0);
    t.session_id = session_id;
    t.user_content = st->Text(1);
    t.state = st->Text(2);
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<PreparedTurn>> Outbox::RecentTurns(const std::string& scope_name, int limit) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT turn_id, session_id, user_content, user_timestamp FROM prepared_turns "
      "WHERE scope_name = ? AND state = 'committed' AND user_content != '' "
      "ORDER BY rowid DESC LIMIT ?");
  if (!st) return st.error();
  st->Bind(1, scope_name).Bind(2, limit);
  std::vector<PreparedTurn> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) break;
    PreparedTurn t;
    t.turn_id = st->Text(0);
    t.scope_name = scope_name;
    t.session_id = st->Text(1);
    t.user_content = st->Text(2);
    t.user_timestamp = st->Text(3);
    t.state = "committed";
    out.push_back(std::move(t));
  }
  return out;
}

Result<bool> Outbox::HasCommittedPrompt(const std::string& scope_name,
                                        const std::string& user_content) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT 1 FROM prepared_turns WHERE scope_name = ? AND user_content = ? "
      "AND state = 'committed' LIMIT 1");
  if (!st) return st.error();
  st->Bind(1, scope_name).Bind(2, user_content);
  auto row = st->Step();
  if (!row) return row.error();
  return *row;
}

Result<std::set<std::string>> Outbox::InjectedBlocks(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare("SELECT given_key FROM session_injected WHERE session_id = ?");
  if (!st) return st.error();
  st->Bind(1, session_id);
  std::set<std::string> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) break;
    out.insert(st->Text(0));
  }
  return out;
}

Status Outbox::AddInjectedBlocks(const std::string& session_id,
                                 const std::vector<std::string>& hashes) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);  // losing it only means a block is given again
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  auto insert =
      db_->Prepare("INSERT OR IGNORE INTO session_injected(session_id, given_key) VALUES(?, ?)");
  if (!insert) return insert.error();
  for (const auto& hash : hashes) {
    insert->Reset();
    insert->Bind(1, session_id).Bind(2, hash);
    if (auto s = insert->Run(); !s) return s.error();
  }
  return tx->Commit();
}

Status Outbox::ForgetInjectedBlocks(const std::string& session_id) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  // The marks of prompts deliberately not stored ("skip:...") stay: they are about the
  // transcript, not the model's context.
  auto st = db_->Prepare(
      "DELETE FROM session_injected WHERE session_id = ? AND given_key NOT LIKE 'skip:%'");
  if (!st) return st.error();
  st->Bind(1, session_id);
  return st->Run();
}

Status Outbox::PutNote(const std::string& name, const json& value) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  auto st = db_->Prepare("INSERT OR REPLACE INTO notes(name, value_json) VALUES(?, ?)");
  if (!st) return st.error();
  st->Bind(1, name).Bind(2, CanonicalJson(value));
  return st->Run();
}

Result<json> Outbox::GetNote(const std::string& name) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare("SELECT value_json FROM notes WHERE name = ?");
  if (!st) return st.error();
  st->Bind(1, name);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return json(nullptr);
  return ParseOr(st->Text(0), nullptr);
}

Status Outbox::PrepareTurn(const PreparedTurn& turn) {
  std::lock_guard lock(mu_);
  // A prepared turn acknowledges no write: if a power failure loses it, the host's commit is
  // refused ("turn_id is unknown") and the host knows the turn was not saved.
  db::RelaxedDurability relaxed(*db_);
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  auto existing = db_->Prepare(
      "SELECT scope_name, session_id, user_message_id, user_content FROM prepared_turns "
      "WHERE turn_id = ?");
  if (!existing) return existing.error();
  existing->Bind(1, turn.turn_id);
  auto found = existing->Step();
  if (!found) return found.error();
  if (*found) {
    if (existing->Text(0) == turn.scope_name && existing->Text(1) == turn.session_id &&
        existing->Text(2) == turn.user_message_id && existing->Text(3) == turn.user_content) {
      return Ok();
    }
    return Error::Conflict("turn_id is already bound to a different user turn");
  }
  const std::string now = NowIsoformat();
  auto insert = db_->Prepare(
      "INSERT INTO prepared_turns(turn_id, scope_name, session_id, user_message_id, "
      "user_content, user_timestamp, recall_receipt_json, state, created_at, updated_at) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, 'prepared', ?, ?)");
  if (!insert) return insert.error();
  insert->Bind(1, turn.turn_id)
      .Bind(2, turn.scope_name)
      .Bind(3, turn.session_id)
      .Bind(4, turn.user_message_id)
      .Bind(5, turn.user_content)
      .Bind(6, turn.user_timestamp)
      .Bind(7, CanonicalJson(turn.recall_receipt))
      .Bind(8, now)
      .Bind(9, now);
  if (auto s = insert->Run(); !s) return s.error();
  return tx->Commit();
}

Result<std::string> Outbox::CommitTurn(const CommitRequest& request) {
  std::lock_guard lock(mu_);
  auto tx = db::Transaction::Immediate(*db_);  // rolled back by its destructor on any error
  if (!tx) return tx.error();
  auto turn = db_->Prepare(
      "SELECT scope_name, session_id, recall_receipt_json, state, item_id FROM prepared_turns "
      "WHERE turn_id = ?");
  if (!turn) return turn.error();
  turn->Bind(1, request.turn_id);
  auto found = turn->Step();
  if (!found) return found.error();
  if (!*found) return Error::NotFound("turn_id is unknown; call tmcra_turn_prepare first");
  const std::string scope = turn->Text(0);
  const std::string session = turn->Text(1);
  const std::string recall = turn->Text(2);
  if (turn->Text(3) == "committed") {
    if (turn->IsNull(4)) return Error::Internal("committed turn has no durable queue item");
    return CommittedItem(*db_, request, turn->Text(4));
  }
  auto existing = db_->Prepare("SELECT item_id FROM ingest_queue WHERE idempotency_key = ?");
  if (!existing) return existing.error();
  existing->Bind(1, request.idempotency_key);
  auto taken = existing->Step();
  if (!taken) return taken.error();
  if (*taken) return Error::Conflict("idempotency key is already bound to a different ingest");
  std::string hex;
  for (char c : UuidV4()) {
    if (c != '-') hex.push_back(c);
  }
  const std::string item_id = "mcp-item-" + hex;
  const std::string now = NowIsoformat();
  auto insert = db_->Prepare(
      "INSERT INTO ingest_queue(item_id, scope_name, session_id, messages_json, consistency, "
      "slow_policy, idempotency_key, metadata_json, agent_id, recall_receipt_json, state, "
      "attempts, created_at, updated_at, next_attempt_at) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, 0)");
  if (!insert) return insert.error();
  insert->Bind(1, item_id)
      .Bind(2, scope)
      .Bind(3, session)
      .Bind(4, CanonicalJson(request.messages))
      .Bind(5, request.consistency)
      .Bind(6, request.slow_policy)
      .Bind(7, request.idempotency_key)
      .Bind(8, CanonicalJson(request.metadata))
      .Bind(9, request.agent_id)
      .Bind(10, recall)
      .Bind(11, now)
      .Bind(12, now);
  if (auto s = insert->Run(); !s) return s.error();
  auto mark = db_->Prepare(
      "UPDATE prepared_turns SET state = 'committed', item_id = ?, updated_at = ? "
      "WHERE turn_id = ?");
  if (!mark) return mark.error();
  mark->Bind(1, item_id).Bind(2, now).Bind(3, request.turn_id);
  if (auto s = mark->Run(); !s) return s.error();
  TMCRA_FAILPOINT("commit.after_insert_before_commit");
  if (auto s = tx->Commit(); !s) return s.error();
  return item_id;
}

namespace {

// One item read with `columns` (kItemColumns or kDeliveryColumns).
Result<Item> SelectItem(db::Database& db, const char* columns, const std::string& item_id) {
  auto st = db.Prepare(std::string("SELECT ") + columns + " FROM ingest_queue WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, item_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return Error::NotFound("no outbox item " + item_id);
  return ReadItem(*st);
}

}  // namespace

Result<Item> Outbox::GetLocked(const std::string& item_id) {
  return SelectItem(*db_, kItemColumns, item_id);
}

Result<Item> Outbox::Get(const std::string& item_id) {
  std::lock_guard lock(mu_);
  return GetLocked(item_id);
}

Result<Item> Outbox::GetForDelivery(const std::string& item_id) {
  std::lock_guard lock(mu_);
  return SelectItem(*db_, kDeliveryColumns, item_id);
}

Result<Peek> Outbox::PeekForDelivery(const std::string& item_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT item_id, state, scope_name, agent_id, attempts, next_attempt_at, "
      // Only a pending item's messages are counted (the count groups it into a batch): the
      // column of any other row is not even read.
      "CASE WHEN state = 'pending' AND json_valid(messages_json) "
      "THEN json_array_length(messages_json) ELSE 0 END, "
      "CASE WHEN state = 'submitted' THEN receipt_json END FROM ingest_queue WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, item_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return Error::NotFound("no outbox item " + item_id);
  Peek peek;
  peek.item_id = st->Text(0);
  peek.state = st->Text(1);
  peek.scope_name = st->Text(2);
  if (!st->IsNull(3)) peek.agent_id = st->Text(3);
  peek.attempts = st->Int(4);
  peek.next_attempt_at = st->Double(5);
  peek.message_count = static_cast<size_t>(std::max<int64_t>(0, st->Int(6)));
  if (!st->IsNull(7)) {
    peek.receipt_text = st->Text(7);
    peek.receipt = ParseOr(peek.receipt_text, nullptr);
  }
  return peek;
}

Result<std::pair<std::string, std::string>> Outbox::StateAndReceipt(const std::string& item_id) {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare("SELECT state, receipt_json FROM ingest_queue WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, item_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return Error::NotFound("no outbox item " + item_id);
  return std::make_pair(st->Text(0), st->IsNull(1) ? std::string() : st->Text(1));
}

Result<Counts> Outbox::GetCounts() {
  std::lock_guard lock(mu_);
  Counts counts;
  auto st = db_->Prepare("SELECT state, COUNT(*) FROM ingest_queue GROUP BY state");
  if (!st) return st.error();
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) break;
    const std::string state = st->Text(0);
    const int64_t n = st->Int(1);
    if (state == kPending) counts.pending = n;
    if (state == kSubmitted) counts.submitted = n;
    if (state == kSucceeded) counts.succeeded = n;
    if (state == kDeadLetter) counts.dead_letter = n;
  }
  auto oldest = db_->Prepare(
      "SELECT MIN(created_at) FROM ingest_queue WHERE state IN ('pending', 'submitted')");
  if (!oldest) return oldest.error();
  if (auto row = oldest->Step(); row && *row && !oldest->IsNull(0)) {
    if (auto t = Seconds(oldest->Text(0))) counts.oldest_pending_seconds = NowSeconds() - *t;
  }
  auto error = db_->Prepare(
      "SELECT last_error FROM ingest_queue WHERE last_error IS NOT NULL "
      "ORDER BY updated_at DESC LIMIT 1");
  if (!error) return error.error();
  if (auto row = error->Step(); row && *row) counts.last_error = error->Text(0);
  return counts;
}

Result<std::vector<std::string>> Outbox::Due(int limit) {
  std::lock_guard lock(mu_);
  // Two lists, so that a backlog's round holds jobs to poll and items to send (DeliverBatch
  // overlaps the two); each is read from the state index's range, not the whole table.
  auto submitted = db_->Prepare(
      "SELECT item_id FROM ingest_queue WHERE state = 'submitted' "
      "ORDER BY created_at, rowid LIMIT ?");
  if (!submitted) return submitted.error();
  submitted->Bind(1, limit);
  auto pending = db_->Prepare(
      "SELECT item_id FROM ingest_queue WHERE state = 'pending' AND next_attempt_at <= ? "
      "ORDER BY created_at, rowid LIMIT ?");
  if (!pending) return pending.error();
  pending->Bind(1, NowSeconds()).Bind(2, limit);
  std::vector<std::string> out;
  for (db::Statement* st : {&*submitted, &*pending}) {
    for (;;) {
      auto row = st->Step();
      if (!row) return row.error();
      if (!*row) break;
      out.push_back(st->Text(0));
    }
  }
  return out;
}

Result<std::optional<double>> Outbox::NextDue() {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare(
      "SELECT MIN(next_attempt_at) FROM ingest_queue WHERE state IN ('pending', 'submitted')");
  if (!st) return st.error();
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row || st->IsNull(0)) return std::optional<double>();
  return std::optional<double>(st->Double(0));
}

Result<std::vector<std::string>> Outbox::InStates(const std::vector<std::string>& states,
                                                  int limit) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  std::string placeholders;
  for (size_t i = 0; i < states.size(); ++i) placeholders += i == 0 ? "?" : ", ?";
  if (states.empty()) return out;
  auto st = db_->Prepare("SELECT item_id FROM ingest_queue WHERE state IN (" + placeholders +
                         ") ORDER BY created_at LIMIT ?");
  if (!st) return st.error();
  int index = 1;
  for (const auto& s : states) st->Bind(index++, s);
  st->Bind(index, limit);
  for (;;) {
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(st->Text(0));
  }
}

Result<bool> Outbox::Claim(const std::string& item_id, const std::string& owner, double seconds) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);  // a claim is advisory: losing it loses nothing
  // Read and write under one write lock (BEGIN IMMEDIATE waits in the busy handler; a read
  // upgraded to a write would fail with BUSY at once when another process wrote in between).
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  auto claimed = ClaimLocked(item_id, owner, seconds);
  if (!claimed) return claimed.error();
  if (auto s = tx->Commit(); !s) return s.error();
  return claimed;
}

Result<std::vector<bool>> Outbox::ClaimEach(const std::vector<std::string>& item_ids,
                                            const std::string& owner, double seconds) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  std::vector<bool> out;
  out.reserve(item_ids.size());
  for (const auto& id : item_ids) {
    auto claimed = ClaimLocked(id, owner, seconds);
    if (!claimed && claimed.error().code != Errc::kNotFound) return claimed.error();
    out.push_back(claimed && *claimed);
  }
  if (auto s = tx->Commit(); !s) return s.error();
  return out;
}

Result<bool> Outbox::ClaimLocked(const std::string& item_id, const std::string& owner,
                                 double seconds) {
  const double now = NowSeconds();
  auto holder = db_->Prepare("SELECT claim_owner FROM ingest_queue WHERE item_id = ?");
  if (!holder) return holder.error();
  holder->Bind(1, item_id);
  auto row = holder->Step();
  if (!row) return row.error();
  if (!*row) return Error::NotFound("no outbox item " + item_id);
  const std::string current = holder->IsNull(0) ? std::string() : holder->Text(0);
  holder->Reset();
  const bool dead = !current.empty() && current != owner && ProcessOwnerIsDead(current);
  auto st = db_->Prepare(
      "UPDATE ingest_queue SET claim_owner = ?, claim_expires_at = ? WHERE item_id = ? AND "
      "(claim_owner IS NULL OR claim_owner = ? OR claim_expires_at < ? OR claim_owner = ?)");
  if (!st) return st.error();
  st->Bind(1, owner)
      .Bind(2, now + seconds)
      .Bind(3, item_id)
      .Bind(4, owner)
      .Bind(5, now)
      .Bind(6, dead ? current : std::string("\x01none"));
  if (auto s = st->Run(); !s) return s.error();
  return db_->Changes() == 1;
}

Status Outbox::Release(const std::string& item_id, const std::string& owner) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  return ReleaseLocked(item_id, owner);
}

Status Outbox::ReleaseLocked(const std::string& item_id, const std::string& owner) {
  auto st = db_->Prepare(
      "UPDATE ingest_queue SET claim_owner = NULL, claim_expires_at = NULL "
      "WHERE item_id = ? AND claim_owner = ?");
  if (!st) return st.error();
  st->Bind(1, item_id).Bind(2, owner);
  return st->Run();
}

Status Outbox::RecordEach(const std::vector<Outcome>& outcomes, const std::string& owner) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  for (const auto& o : outcomes) {
    Status s = Ok();
    switch (o.kind) {
      case Outcome::Kind::kReleaseOnly:
        break;
      case Outcome::Kind::kMarkSubmitted:
        s = SetStateLocked(o.item_id, kSubmitted, &o.receipt, std::nullopt, false, 0, false);
        break;
      case Outcome::Kind::kMarkSucceeded:
        s = SetStateLocked(o.item_id, kSucceeded, &o.receipt, std::nullopt, false, 0, false);
        break;
      case Outcome::Kind::kMarkDeadLetter:
        s = SetStateLocked(o.item_id, kDeadLetter, o.receipt.is_null() ? nullptr : &o.receipt,
                           o.error, true, 0, o.erase_content);
        break;
      case Outcome::Kind::kRetryLater:
        s = RecordFailureLocked(o.item_id, o.error, o.next_attempt_at);
        break;
    }
    if (!s) return s;
    if (auto r = ReleaseLocked(o.item_id, owner); !r) return r;
  }
  return tx->Commit();
}

Status Outbox::SetState(const std::string& item_id, const char* state, const json* receipt,
                        const std::optional<std::string>& error, bool count_attempt,
                        double next_attempt_at, bool erase_content) {
  std::lock_guard lock(mu_);
  // Progress after delivery: if a power failure loses it, the item is delivered again under
  // the same key and the memory replays it. The writes that hold content stay fully durable.
  db::RelaxedDurability relaxed(*db_);
  return SetStateLocked(item_id, state, receipt, error, count_attempt, next_attempt_at,
                        erase_content);
}

Status Outbox::SetStateLocked(const std::string& item_id, const char* state, const json* receipt,
                              const std::optional<std::string>& error, bool count_attempt,
                              double next_attempt_at, bool erase_content) {
  std::string sql = "UPDATE ingest_queue SET state = ?, updated_at = ?, next_attempt_at = ?";
  if (receipt != nullptr) sql += ", receipt_json = ?";
  if (error) sql += ", last_error = ?";
  if (count_attempt) sql += ", attempts = attempts + 1";
  if (erase_content) sql += ", messages_json = '[]'";
  sql += " WHERE item_id = ?";
  auto st = db_->Prepare(sql);
  if (!st) return st.error();
  int i = 1;
  st->Bind(i++, state);
  st->Bind(i++, NowIsoformat());
  st->Bind(i++, next_attempt_at);
  if (receipt != nullptr) {
    if (receipt->is_null()) {
      st->BindNull(i++);
    } else {
      st->Bind(i++, CanonicalJson(*receipt));
    }
  }
  if (error) st->Bind(i++, Truncate(*error, 2000));
  st->Bind(i, item_id);
  if (auto s = st->Run(); !s) return s;
  if (db_->Changes() != 1) return Error::NotFound("no outbox item " + item_id);
  if (std::string_view(state) == kSucceeded) return PruneRecallLocked(item_id);
  return Ok();
}

Status Outbox::PruneRecallLocked(const std::string& item_id) {
  static constexpr const char* kPruned =
      "json_object('pruned', json('true'), 'query_id', "
      "json_extract(recall_receipt_json, '$.query_id'))";
  for (const char* table : {"ingest_queue", "prepared_turns"}) {
    auto st =
        db_->Prepare(std::string("UPDATE ") + table + " SET recall_receipt_json = " + kPruned +
                     " WHERE item_id = ? AND recall_receipt_json IS NOT NULL " +
                     "AND json_valid(recall_receipt_json) AND " +
                     "json_extract(recall_receipt_json, '$.pruned') IS NULL");
    if (!st) return st.error();
    st->Bind(1, item_id);
    if (auto s = st->Run(); !s) return s;
  }
  return Ok();
}

Status Outbox::MarkSubmitted(const std::string& item_id, const json& receipt) {
  return SetState(item_id, kSubmitted, &receipt, std::nullopt, false, 0, false);
}

Status Outbox::MarkSucceeded(const std::string& item_id, const json& receipt) {
  return SetState(item_id, kSucceeded, &receipt, std::nullopt, false, 0, false);
}

Status Outbox::MarkDeadLetter(const std::string& item_id, const std::string& reason,
                              const json& receipt, bool erase_content) {
  return SetState(item_id, kDeadLetter, receipt.is_null() ? nullptr : &receipt, reason, true, 0,
                  erase_content);
}

Status Outbox::RecordFailure(const std::string& item_id, const std::string& error,
                             double next_attempt_at) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  return RecordFailureLocked(item_id, error, next_attempt_at);
}

Status Outbox::RecordFailureLocked(const std::string& item_id, const std::string& error,
                                   double next_attempt_at) {
  auto st = db_->Prepare(
      "UPDATE ingest_queue SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?, "
      "updated_at = ? WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, Truncate(error, 2000))
      .Bind(2, next_attempt_at)
      .Bind(3, NowIsoformat())
      .Bind(4, item_id);
  return st->Run();
}

Status Outbox::Replay(const std::string& item_id) {
  std::lock_guard lock(mu_);
  auto item = GetLocked(item_id);
  if (!item) return item.error();
  if (item->state != kDeadLetter) {
    return Error::Conflict("item " + item_id + " is " + item->state + ", not dead_letter");
  }
  if (item->messages.empty()) {
    return Error::Conflict("item " + item_id +
                           " was discarded by the memory mode; its content "
                           "is gone");
  }
  auto st = db_->Prepare(
      "UPDATE ingest_queue SET state = 'pending', attempts = 0, next_attempt_at = 0, "
      "receipt_json = NULL, updated_at = ? WHERE item_id = ?");
  if (!st) return st.error();
  st->Bind(1, NowIsoformat()).Bind(2, item_id);
  return st->Run();
}

Result<bool> Outbox::AcquireDeliveryLease(const std::string& holder, double seconds) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  auto tx = db::Transaction::Immediate(*db_);
  if (!tx) return tx.error();
  const double now = NowSeconds();
  std::string dead_holder = "\x01none";
  auto current = db_->Prepare("SELECT holder FROM delivery_lease WHERE id = 1");
  if (!current) return current.error();
  if (auto row = current->Step(); row && *row) {
    const std::string h = current->Text(0);
    if (h != holder && ProcessOwnerIsDead(h)) dead_holder = h;
  }
  current->Reset();
  auto st = db_->Prepare(
      "INSERT INTO delivery_lease(id, holder, pid, expires_at) VALUES(1, ?1, ?2, ?3) "
      "ON CONFLICT(id) DO UPDATE SET holder = ?1, pid = ?2, expires_at = ?3 "
      "WHERE delivery_lease.holder = ?1 OR delivery_lease.expires_at < ?4 "
      "OR delivery_lease.holder = ?5");
  if (!st) return st.error();
  st->Bind(1, holder)
      .Bind(2, static_cast<int64_t>(getpid()))
      .Bind(3, now + seconds)
      .Bind(4, now)
      .Bind(5, dead_holder);
  if (auto s = st->Run(); !s) return s.error();
  const bool acquired = db_->Changes() == 1;
  if (auto s = tx->Commit(); !s) return s.error();
  return acquired;
}

Status Outbox::ReleaseDeliveryLease(const std::string& holder) {
  std::lock_guard lock(mu_);
  db::RelaxedDurability relaxed(*db_);
  auto st = db_->Prepare("DELETE FROM delivery_lease WHERE id = 1 AND holder = ?");
  if (!st) return st.error();
  st->Bind(1, holder);
  return st->Run();
}

Result<json> Outbox::DeliveryLeaseHolder() {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare("SELECT holder, pid, expires_at FROM delivery_lease WHERE id = 1");
  if (!st) return st.error();
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return json(nullptr);
  const double left = st->Double(2) - NowSeconds();
  if (left < 0) return json(nullptr);
  return json{{"holder", st->Text(0)},
              {"pid", st->Int(1)},
              {"expires_in_seconds", std::round(left * 10) / 10}};
}

Result<bool> Outbox::IntegrityOk() {
  std::lock_guard lock(mu_);
  auto st = db_->Prepare("PRAGMA integrity_check");
  if (!st) return st.error();
  auto row = st->Step();
  if (!row) return row.error();
  return *row && st->Text(0) == "ok";
}

}  // namespace tmcra::queue
