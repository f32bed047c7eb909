// tmcra-memd's API keys in PostgreSQL: table memd_api_keys, schema component "memd_keys".
#include <nlohmann/json.hpp>

#include "memd/key_rows.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;

constexpr const char* kSteps[] = {
    "CREATE TABLE memd_api_keys("
    "  key_id TEXT PRIMARY KEY,"
    "  secret_sha256 TEXT NOT NULL,"
    "  permissions TEXT NOT NULL,"     // JSON array of strings
    "  scope_names TEXT NOT NULL,"     // JSON array of strings
    "  scope_prefixes TEXT NOT NULL,"  // JSON array of strings
    "  label TEXT NOT NULL DEFAULT '',"
    "  created_at DOUBLE PRECISION NOT NULL,"
    "  revoked_at DOUBLE PRECISION)",
    // Secrets of the servers (KeyStore::ServerSecret), created by the first, shared by all.
    "CREATE TABLE memd_server_secrets(name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    // Records of the servers (KeyStore::PutRecord): OAuth, and answers of long MCP calls.
    "CREATE TABLE memd_server_records(kind TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,"
    "  family TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL,"
    "  created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY(kind, id))",
    "CREATE INDEX memd_server_records_family ON memd_server_records(family)",
};

constexpr const char* kColumns =
    "key_id, secret_sha256, permissions, scope_names, scope_prefixes, label, created_at, "
    "revoked_at";

// Connections kept for Authenticate, which every request calls.
constexpr size_t kConnections = 4;

std::vector<std::string> StringList(std::string_view text) {
  std::vector<std::string> out;
  json parsed = json::parse(text, nullptr, false);
  if (!parsed.is_array()) return out;
  for (const auto& v : parsed) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

StoredKey KeyFromRow(const pg::Rows& rows, int row) {
  StoredKey stored;
  ApiKey& key = stored.key;
  key.key_id = std::string(rows.Text(row, 0));
  stored.secret_sha256 = std::string(rows.Text(row, 1));
  key.permissions = StringList(rows.Text(row, 2));
  key.scope_names = StringList(rows.Text(row, 3));
  key.scope_prefixes = StringList(rows.Text(row, 4));
  key.label = std::string(rows.Text(row, 5));
  key.created_at = rows.Double(row, 6);
  if (!rows.IsNull(row, 7)) key.revoked_at = rows.Double(row, 7);
  return stored;
}

class PostgresKeyRows final : public KeyRows {
 public:
  explicit PostgresKeyRows(const pg::ConnectOptions& options) : pool_(options, kConnections) {}

  Status Insert(const StoredKey& stored) override {
    const ApiKey& key = stored.key;
    const pg::Param params[] = {key.key_id,
                                stored.secret_sha256,
                                json(key.permissions).dump(),
                                json(key.scope_names).dump(),
                                json(key.scope_prefixes).dump(),
                                key.label,
                                key.created_at};
    auto done = Exec(
        "INSERT INTO memd_api_keys(key_id, secret_sha256, permissions, scope_names, "
        "scope_prefixes, label, created_at) VALUES($1, $2, $3, $4, $5, $6, $7)",
        params, /*idempotent=*/false);
    if (!done) return done.error();
    return Ok();
  }

  Result<std::vector<ApiKey>> List() override {
    auto rows =
        Exec(std::string("SELECT ") + kColumns + " FROM memd_api_keys ORDER BY created_at, key_id",
             {}, /*idempotent=*/true);
    if (!rows) return rows.error();
    std::vector<ApiKey> out;
    for (int i = 0; i < rows->size(); ++i) out.push_back(KeyFromRow(*rows, i).key);
    return out;
  }

  Result<bool> Revoke(std::string_view key_id, double now) override {
    const pg::Param params[] = {now, key_id};
    // Idempotent: COALESCE keeps the first revocation time.
    auto rows =
        Exec("UPDATE memd_api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE key_id = $2",
             params, /*idempotent=*/true);
    if (!rows) return rows.error();
    return rows->Affected() > 0;
  }

  Result<std::optional<StoredKey>> Find(std::string_view key_id) override {
    const pg::Param params[] = {key_id};
    auto rows = Exec(std::string("SELECT ") + kColumns + " FROM memd_api_keys WHERE key_id = $1",
                     params, /*idempotent=*/true);
    if (!rows) return rows.error();
    if (rows->size() == 0) return std::optional<StoredKey>();
    return std::optional<StoredKey>(KeyFromRow(*rows, 0));
  }

  Result<std::string> Secret(std::string_view name, const std::string& fresh) override {
    const pg::Param params[] = {name, fresh};
    auto inserted = Exec(
        "INSERT INTO memd_server_secrets(name, value) VALUES($1, $2) ON CONFLICT (name) DO NOTHING",
        params, /*idempotent=*/true);
    if (!inserted) return inserted.error();
    const pg::Param key[] = {name};
    auto rows = Exec("SELECT value FROM memd_server_secrets WHERE name = $1", key,
                     /*idempotent=*/true);
    if (!rows) return rows.error();
    if (rows->size() == 0) return Error::Internal("a server secret vanished as it was stored");
    return std::string(rows->Text(0, 0));
  }

  Status PutRecord(const ServerRecord& r, double now) override {
    const pg::Param params[] = {r.kind, r.id, r.data, r.family, r.expires_at, now};
    auto done = Exec(
        "INSERT INTO memd_server_records(kind, id, data, family, expires_at, created_at) "
        "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, id) DO UPDATE SET data = $3, "
        "family = $4, expires_at = $5",
        params, /*idempotent=*/true);
    if (!done) return done.error();
    return Ok();
  }

  Result<std::optional<ServerRecord>> GetRecord(std::string_view kind,
                                                std::string_view id) override {
    const pg::Param params[] = {kind, id};
    return OneRecord(
        "SELECT data, family, expires_at FROM memd_server_records WHERE kind = $1 AND id = $2",
        params, kind, id, /*idempotent=*/true);
  }

  Result<std::optional<ServerRecord>> TakeRecord(std::string_view kind,
                                                 std::string_view id) override {
    // One statement: of two instances taking the same code, one gets the row.
    const pg::Param params[] = {kind, id};
    return OneRecord(
        "DELETE FROM memd_server_records WHERE kind = $1 AND id = $2 "
        "RETURNING data, family, expires_at",
        params, kind, id, /*idempotent=*/false);
  }

  Status DropRecordFamily(std::string_view family) override {
    const pg::Param params[] = {family};
    auto done = Exec("DELETE FROM memd_server_records WHERE family = $1", params, true);
    if (!done) return done.error();
    return Ok();
  }

  Result<int64_t> CountRecords(std::string_view kind, double since) override {
    const pg::Param params[] = {kind, since};
    auto rows =
        Exec("SELECT COUNT(*) FROM memd_server_records WHERE kind = $1 AND created_at >= $2",
             params, true);
    if (!rows) return rows.error();
    return rows->Int(0, 0);
  }

  Status DropExpiredRecords(double now) override {
    const pg::Param params[] = {now};
    auto done = Exec("DELETE FROM memd_server_records WHERE expires_at <= $1", params, true);
    if (!done) return done.error();
    return Ok();
  }

  Status Migrate() {
    auto conn = pool_.Borrow();
    if (!conn) return conn.error();
    return pg::Migrate(**conn, "memd_keys", kSteps, "tmcra-memd's key store");
  }

 private:
  // One statement on a pooled connection. A statement that found its connection broken (the
  // server restarted) is sent once more on a fresh one when sending it twice is harmless.
  Result<pg::Rows> Exec(const std::string& sql, std::span<const pg::Param> params,
                        bool idempotent) {
    for (int attempt = 0;; ++attempt) {
      auto conn = pool_.Borrow();
      if (!conn) return conn.error();
      auto rows = (*conn)->Exec(sql, params);
      if (rows || !idempotent || attempt > 0 || rows.error().code != Errc::kUnavailable) {
        return rows;
      }
    }
  }

  Result<std::optional<ServerRecord>> OneRecord(const std::string& sql,
                                                std::span<const pg::Param> params,
                                                std::string_view kind, std::string_view id,
                                                bool idempotent) {
    auto rows = Exec(sql, params, idempotent);
    if (!rows) return rows.error();
    if (rows->size() == 0) return std::optional<ServerRecord>();
    return std::optional<ServerRecord>(
        ServerRecord{std::string(kind), std::string(id), std::string(rows->Text(0, 0)),
                     std::string(rows->Text(0, 1)), rows->Double(0, 2)});
  }

  pg::ConnectionPool pool_;
};

}  // namespace

Result<std::unique_ptr<KeyRows>> OpenPostgresKeyRows(const pg::ConnectOptions& options) {
  auto rows = std::make_unique<PostgresKeyRows>(options);
  if (auto s = rows->Migrate(); !s) return s.error();
  return std::unique_ptr<KeyRows>(std::move(rows));
}

}  // namespace tmcra::memd
