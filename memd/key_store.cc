#include "memd/key_store.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <iterator>

#include "base/clock.h"
#include "base/identifiers.h"
#include "base/sha256.h"
#include "base/sqlite_db.h"
#include "memd/key_rows.h"
#include "memory/engine.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;

constexpr size_t kKeyIdHex = 24;
constexpr size_t kSecretHex = 64;
constexpr size_t kMaxLabel = 200;

constexpr const char* kMigrations[] = {
    "CREATE TABLE api_keys("
    "  key_id TEXT PRIMARY KEY,"
    "  secret_sha256 TEXT NOT NULL,"
    "  permissions TEXT NOT NULL,"     // JSON array of strings
    "  scope_names TEXT NOT NULL,"     // JSON array of strings
    "  scope_prefixes TEXT NOT NULL,"  // JSON array of strings
    "  label TEXT NOT NULL DEFAULT '',"
    "  created_at REAL NOT NULL,"
    "  revoked_at REAL)",
    // Secrets of the server itself (KeyStore::ServerSecret), created once, never shown.
    "CREATE TABLE server_secrets(name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    // Records of the server (KeyStore::PutRecord): OAuth, and answers of long MCP calls.
    "CREATE TABLE server_records(kind TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,"
    "  family TEXT NOT NULL, expires_at REAL NOT NULL, created_at REAL NOT NULL,"
    "  PRIMARY KEY(kind, id))",
    "CREATE INDEX server_records_family ON server_records(family)",
};

}  // namespace

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = getrandom(raw.data() + done, bytes - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source: nothing safe to hand out
    }
    done += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (char c : raw) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0x0f]);
  }
  return out;
}

namespace {

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Status Migrate(db::Database& db) { return db::Migrate(db, kMigrations, "the key store"); }

std::vector<std::string> StringList(const std::string& text) {
  std::vector<std::string> out;
  json parsed = json::parse(text, nullptr, false);
  if (!parsed.is_array()) return out;
  for (const auto& v : parsed) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

constexpr const char* kColumns =
    "key_id, secret_sha256, permissions, scope_names, scope_prefixes, label, created_at, "
    "revoked_at";

ApiKey KeyFromRow(const db::Statement& st) {
  ApiKey key;
  key.key_id = st.Text(0);
  key.permissions = StringList(st.Text(2));
  key.scope_names = StringList(st.Text(3));
  key.scope_prefixes = StringList(st.Text(4));
  key.label = st.Text(5);
  key.created_at = st.Double(6);
  if (!st.IsNull(7)) key.revoked_at = st.Double(7);
  return key;
}

// A scope prefix: what a scope name may start with (the name grammar without its length floor).
bool IsValidScopePrefix(std::string_view prefix) {
  if (prefix.empty()) return false;
  // Every non-empty prefix of a valid name is itself a valid name.
  return IsValidScope(prefix);
}

}  // namespace

const std::vector<std::string>& DefaultPermissions() {
  static const std::vector<std::string> kDefault{kPermRead, kPermWrite, kPermFeedback};
  return kDefault;
}

const std::vector<std::string>& KnownPermissions() {
  static const std::vector<std::string> kKnown{kPermRead, kPermWrite, kPermFeedback, kPermDelete,
                                               kPermExport};
  return kKnown;
}

bool ApiKey::Has(std::string_view permission) const {
  return std::find(permissions.begin(), permissions.end(), permission) != permissions.end();
}

bool ApiKey::AllowsScope(std::string_view scope) const {
  if (scope_names.empty() && scope_prefixes.empty()) return true;
  for (const auto& name : scope_names) {
    if (scope == name) return true;
  }
  for (const auto& prefix : scope_prefixes) {
    if (scope.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

json ApiKey::ToJson() const {
  return json{{"key_id", key_id},
              {"permissions", permissions},
              {"scope_names", scope_names},
              {"scope_prefixes", scope_prefixes},
              {"label", label},
              {"created_at", FormatIsoUtc(created_at)},
              {"revoked_at", revoked_at ? json(FormatIsoUtc(*revoked_at)) : json(nullptr)}};
}

std::optional<ParsedToken> ParseToken(std::string_view token) {
  constexpr std::string_view kPrefix = "tmcra_";
  if (token.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  token.remove_prefix(kPrefix.size());
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view id = token.substr(0, dot);
  const std::string_view secret = token.substr(dot + 1);
  if (id.size() != kKeyIdHex || !IsLowerHex(id)) return std::nullopt;
  if (secret.size() != kSecretHex || !IsLowerHex(secret)) return std::nullopt;
  return ParsedToken{std::string(id), std::string(secret)};
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  // Read through a volatile so the loop cannot be cut short by the optimiser.
  volatile unsigned char result = diff;
  return result == 0;
}

namespace {

// The keys in `<data_dir>/keys.db`, one connection behind a mutex.
class SqliteKeyRows final : public KeyRows {
 public:
  explicit SqliteKeyRows(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}

  Status Insert(const StoredKey& stored) override {
    std::lock_guard lock(mu_);
    auto tx = db::Transaction::Immediate(*db_);
    if (!tx) return tx.error();
    auto insert = db_->Prepare(
        "INSERT INTO api_keys(key_id, secret_sha256, permissions, scope_names, scope_prefixes, "
        "label, created_at) VALUES(?, ?, ?, ?, ?, ?, ?)");
    if (!insert) return insert.error();
    const ApiKey& key = stored.key;
    insert->Bind(1, key.key_id)
        .Bind(2, stored.secret_sha256)
        .Bind(3, json(key.permissions).dump())
        .Bind(4, json(key.scope_names).dump())
        .Bind(5, json(key.scope_prefixes).dump())
        .Bind(6, key.label)
        .Bind(7, key.created_at);
    if (auto s = insert->Run(); !s) return s.error();
    return tx->Commit();
  }

  Result<std::vector<ApiKey>> List() override {
    std::lock_guard lock(mu_);
    auto st = db_->Prepare(std::string("SELECT ") + kColumns +
                           " FROM api_keys ORDER BY created_at, key_id");
    if (!st) return st.error();
    std::vector<ApiKey> out;
    for (;;) {
      auto row = st->Step();
      if (!row) return row.error();
      if (!*row) break;
      out.push_back(KeyFromRow(*st));
    }
    return out;
  }

  Result<bool> Revoke(std::string_view key_id, double now) override {
    std::lock_guard lock(mu_);
    auto tx = db::Transaction::Immediate(*db_);
    if (!tx) return tx.error();
    auto st =
        db_->Prepare("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ?");
    if (!st) return st.error();
    st->Bind(1, now).Bind(2, key_id);
    if (auto s = st->Run(); !s) return s.error();
    const bool found = db_->Changes() > 0;
    if (auto s = tx->Commit(); !s) return s.error();
    return found;
  }

  Result<std::optional<StoredKey>> Find(std::string_view key_id) override {
    std::lock_guard lock(mu_);
    auto st = db_->Prepare(std::string("SELECT ") + kColumns + " FROM api_keys WHERE key_id = ?");
    if (!st) return st.error();
    st->Bind(1, key_id);
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) return std::optional<StoredKey>();
    return std::optional<StoredKey>(StoredKey{KeyFromRow(*st), st->Text(1)});
  }

  Status PutRecord(const ServerRecord& r, double now) override {
    std::lock_guard lock(mu_);
    auto st = db_->Prepare(
        "INSERT INTO server_records(kind, id, data, family, expires_at, created_at) "
        "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(kind, id) DO UPDATE SET data = excluded.data, "
        "family = excluded.family, expires_at = excluded.expires_at");
    if (!st) return st.error();
    st->Bind(1, r.kind)
        .Bind(2, r.id)
        .Bind(3, r.data)
        .Bind(4, r.family)
        .Bind(5, r.expires_at)
        .Bind(6, now);
    return st->Run();
  }

  Result<std::optional<ServerRecord>> GetRecord(std::string_view kind,
                                                std::string_view id) override {
    std::lock_guard lock(mu_);
    return ReadRecord(kind, id);
  }

  Result<std::optional<ServerRecord>> TakeRecord(std::string_view kind,
                                                 std::string_view id) override {
    std::lock_guard lock(mu_);
    auto tx = db::Transaction::Immediate(*db_);
    if (!tx) return tx.error();
    TMCRA_ASSIGN_OR_RETURN(auto found, ReadRecord(kind, id));
    if (!found) return found;
    auto del = db_->Prepare("DELETE FROM server_records WHERE kind = ? AND id = ?");
    if (!del) return del.error();
    del->Bind(1, kind).Bind(2, id);
    if (auto s = del->Run(); !s) return s.error();
    if (auto s = tx->Commit(); !s) return s.error();
    return found;
  }

  Status DropRecordFamily(std::string_view family) override {
    std::lock_guard lock(mu_);
    auto st = db_->Prepare("DELETE FROM server_records WHERE family = ?");
    if (!st) return st.error();
    st->Bind(1, family);
    return st->Run();
  }

  Result<int64_t> CountRecords(std::string_view kind, double since) override {
    std::lock_guard lock(mu_);
    auto st =
        db_->Prepare("SELECT COUNT(*) FROM server_records WHERE kind = ? AND created_at >= ?");
    if (!st) return st.error();
    st->Bind(1, kind).Bind(2, since);
    auto row = st->Step();
    if (!row) return row.error();
    return static_cast<int64_t>(st->Int(0));
  }

  Status DropExpiredRecords(double now) override {
    std::lock_guard lock(mu_);
    auto st = db_->Prepare("DELETE FROM server_records WHERE expires_at <= ?");
    if (!st) return st.error();
    st->Bind(1, now);
    return st->Run();
  }

  Result<std::string> Secret(std::string_view name, const std::string& fresh) override {
    std::lock_guard lock(mu_);
    auto tx = db::Transaction::Immediate(*db_);
    if (!tx) return tx.error();
    auto insert = db_->Prepare("INSERT OR IGNORE INTO server_secrets(name, value) VALUES(?, ?)");
    if (!insert) return insert.error();
    insert->Bind(1, name).Bind(2, fresh);
    if (auto s = insert->Run(); !s) return s.error();
    auto st = db_->Prepare("SELECT value FROM server_secrets WHERE name = ?");
    if (!st) return st.error();
    st->Bind(1, name);
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) return Error::Internal("a server secret vanished as it was stored");
    std::string value = st->Text(0);
    if (auto s = tx->Commit(); !s) return s.error();
    return value;
  }

 private:
  // REQUIRES: mu_ held.
  Result<std::optional<ServerRecord>> ReadRecord(std::string_view kind, std::string_view id) {
    auto st = db_->Prepare(
        "SELECT data, family, expires_at FROM server_records WHERE kind = ? AND id = ?");
    if (!st) return st.error();
    st->Bind(1, kind).Bind(2, id);
    auto row = st->Step();
    if (!row) return row.error();
    if (!*row) return std::optional<ServerRecord>();
    return std::optional<ServerRecord>(
        ServerRecord{std::string(kind), std::string(id), st->Text(0), st->Text(1), st->Double(2)});
  }

  std::mutex mu_;
  std::unique_ptr<db::Database> db_;  // guarded by mu_
};

Status ValidateRequest(const NewKeyRequest& request, std::vector<std::string>& permissions) {
  if (request.permissions && request.permissions->empty()) {
    return Error::Invalid(
        "the permission list is empty: name at least one of memory:read, "
        "memory:write, memory:feedback, memory:delete, memory:export (leave --permissions "
        "out for read, write and feedback)");
  }
  permissions = request.permissions.value_or(DefaultPermissions());
  for (const auto& p : permissions) {
    if (std::find(KnownPermissions().begin(), KnownPermissions().end(), p) ==
        KnownPermissions().end()) {
      return Error::Invalid("unknown permission '" + p +
                            "' (known: memory:read, memory:write, memory:feedback, "
                            "memory:delete, memory:export)");
    }
  }
  std::sort(permissions.begin(), permissions.end());
  permissions.erase(std::unique(permissions.begin(), permissions.end()), permissions.end());
  for (const auto& name : request.scope_names) {
    if (!IsValidScope(name)) {
      return Error::Invalid("invalid scope name '" + name + "' (must match " +
                            std::string(kScopePattern) + ")");
    }
  }
  for (const auto& prefix : request.scope_prefixes) {
    if (!IsValidScopePrefix(prefix)) {
      return Error::Invalid("invalid scope prefix '" + prefix +
                            "' (must be the start of a valid scope name)");
    }
  }
  if (request.label.size() > kMaxLabel) return Error::Invalid("the label is over 200 bytes");
  return Ok();
}

}  // namespace

Result<std::unique_ptr<KeyRows>> OpenSqliteKeyRows(const std::string& data_dir) {
  auto db = db::Database::Open({data_dir + "/keys.db"});
  if (!db) return db.error();
  if (auto s = Migrate(**db); !s) return s.error();
  return std::unique_ptr<KeyRows>(std::make_unique<SqliteKeyRows>(std::move(*db)));
}

KeyStore::KeyStore(std::unique_ptr<KeyRows> rows) : rows_(std::move(rows)) {}
KeyStore::~KeyStore() = default;

Result<std::unique_ptr<KeyStore>> KeyStore::Open(const std::string& data_dir) {
  auto rows = OpenSqliteKeyRows(data_dir);
  if (!rows) return rows.error();
  return std::unique_ptr<KeyStore>(new KeyStore(std::move(*rows)));
}

Result<std::unique_ptr<KeyStore>> KeyStore::OpenPostgres(const pg::ConnectOptions& options) {
  auto rows = OpenPostgresKeyRows(options);
  if (!rows) return rows.error();
  return std::unique_ptr<KeyStore>(new KeyStore(std::move(*rows)));
}

Result<CreatedKey> KeyStore::Create(const NewKeyRequest& request) {
  std::vector<std::string> permissions;
  if (auto s = ValidateRequest(request, permissions); !s) return s.error();
  CreatedKey created;
  created.key.key_id = RandomHex(kKeyIdHex / 2);
  created.key.permissions = permissions;
  created.key.scope_names = request.scope_names;
  created.key.scope_prefixes = request.scope_prefixes;
  created.key.label = request.label;
  created.key.created_at = NowSeconds();
  const std::string secret = RandomHex(kSecretHex / 2);
  created.token = "tmcra_" + created.key.key_id + "." + secret;
  if (auto s = rows_->Insert(StoredKey{created.key, Sha256Hex(secret)}); !s) return s.error();
  return created;
}

Result<std::vector<ApiKey>> KeyStore::List() { return rows_->List(); }

Result<bool> KeyStore::Revoke(std::string_view key_id) {
  return rows_->Revoke(key_id, NowSeconds());
}

Status KeyStore::PutRecord(const ServerRecord& record) {
  return rows_->PutRecord(record, NowSeconds());
}

Result<std::optional<ServerRecord>> KeyStore::GetRecord(std::string_view kind,
                                                        std::string_view id) {
  TMCRA_ASSIGN_OR_RETURN(auto found, rows_->GetRecord(kind, id));
  if (found && found->expires_at <= NowSeconds()) return std::optional<ServerRecord>();
  return found;
}

Result<std::optional<ServerRecord>> KeyStore::TakeRecord(std::string_view kind,
                                                         std::string_view id) {
  TMCRA_ASSIGN_OR_RETURN(auto found, rows_->TakeRecord(kind, id));
  if (found && found->expires_at <= NowSeconds()) return std::optional<ServerRecord>();
  return found;
}

Status KeyStore::DropRecordFamily(std::string_view family) {
  return rows_->DropRecordFamily(family);
}

Result<int64_t> KeyStore::CountRecords(std::string_view kind, double since) {
  return rows_->CountRecords(kind, since);
}

Status KeyStore::DropExpiredRecords() { return rows_->DropExpiredRecords(NowSeconds()); }

Result<std::string> KeyStore::ServerSecret(std::string_view name) {
  return rows_->Secret(name, RandomHex(32));
}

Result<std::optional<ApiKey>> KeyStore::Find(std::string_view key_id) {
  auto found = rows_->Find(key_id);
  if (!found) return found.error();
  if (!*found) return std::optional<ApiKey>();
  return std::optional<ApiKey>(std::move((*found)->key));
}

Result<KeyStore::AuthOutcome> KeyStore::Authenticate(std::string_view token) {
  auto parsed = ParseToken(token);
  if (!parsed) return AuthOutcome{std::nullopt, "malformed token"};
  // Hash first, whatever the lookup finds, so a miss costs the same as a wrong secret.
  const std::string presented = Sha256Hex(parsed->secret);
  auto found = rows_->Find(parsed->key_id);
  if (!found) return found.error();
  if (!*found) return AuthOutcome{std::nullopt, "unknown key " + parsed->key_id};
  const bool secret_ok = ConstantTimeEquals(presented, (*found)->secret_sha256);
  ApiKey key = std::move((*found)->key);
  if (!secret_ok) return AuthOutcome{std::nullopt, "wrong secret for key " + key.key_id};
  if (key.revoked_at) return AuthOutcome{std::nullopt, "revoked key " + key.key_id};
  return AuthOutcome{std::move(key), ""};
}

}  // namespace tmcra::memd
