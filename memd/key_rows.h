// Where tmcra-memd's API keys are stored: the rows behind memd/key_store.h's KeyStore, which
// validates requests and tokens and leaves storage to these. Two stores: a SQLite file in the
// data directory (key_store.cc) and a PostgreSQL database (key_rows_pg.cc). Both are
// thread-safe, and both read the store on every call (no cache), so a key revoked by another
// process is refused at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/pg_db.h"
#include "base/result.h"
#include "memd/key_store.h"

namespace tmcra::memd {

// A stored key with the SHA-256 (hex) of its secret.
struct StoredKey {
  ApiKey key;
  std::string secret_sha256;
};

class KeyRows {
 public:
  virtual ~KeyRows() = default;
  [[nodiscard]] virtual Status Insert(const StoredKey& stored) = 0;
  // Every key, oldest first (ties by id).
  [[nodiscard]] virtual Result<std::vector<ApiKey>> List() = 0;
  // Marks the key revoked at `now` unless it already is; false when there is no such key.
  [[nodiscard]] virtual Result<bool> Revoke(std::string_view key_id, double now) = 0;
  [[nodiscard]] virtual Result<std::optional<StoredKey>> Find(std::string_view key_id) = 0;
  // The secret stored under `name`, storing `fresh` first when there is none (the first caller
  // of any process wins; every later one reads it).
  [[nodiscard]] virtual Result<std::string> Secret(std::string_view name,
                                                   const std::string& fresh) = 0;

  // Server records (ServerRecord): as KeyStore's methods of the same names say.
  [[nodiscard]] virtual Status PutRecord(const ServerRecord& record, double now) = 0;
  [[nodiscard]] virtual Result<std::optional<ServerRecord>> GetRecord(std::string_view kind,
                                                                      std::string_view id) = 0;
  [[nodiscard]] virtual Result<std::optional<ServerRecord>> TakeRecord(std::string_view kind,
                                                                       std::string_view id) = 0;
  [[nodiscard]] virtual Status DropRecordFamily(std::string_view family) = 0;
  [[nodiscard]] virtual Result<int64_t> CountRecords(std::string_view kind, double since) = 0;
  [[nodiscard]] virtual Status DropExpiredRecords(double now) = 0;
};

[[nodiscard]] Result<std::unique_ptr<KeyRows>> OpenSqliteKeyRows(const std::string& data_dir);
[[nodiscard]] Result<std::unique_ptr<KeyRows>> OpenPostgresKeyRows(
    const pg::ConnectOptions& options);

}  // namespace tmcra::memd
