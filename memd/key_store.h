// API keys of tmcra-memd: `tmcra_<key_id>.<secret>`, stored hashed in a SQLite file of the data
// directory (`keys.db`, 0600 in a 0700 directory, like every store of ours), or in table
// memd_api_keys of a PostgreSQL database (memd/key_rows.h), shared by every memd on it.
//
// A key is 24 lower-case hex digits of id and 64 of secret, both from getrandom(2). Only the
// SHA-256 of the secret is stored, and it is compared in constant time; the secret is shown once,
// by `tmcra-memd keys create`, and never logged. A key carries permissions (memory:read,
// memory:write, memory:feedback by default; memory:delete and memory:export only when named)
// and may be limited to exact scope names and scope prefixes.
// Revocation is a mark, so a revoked id is never reused and `keys list` still shows it.
//
// Every Authenticate reads the store, so `keys revoke` run by another process (or through another
// memd on the same database) takes effect on the next request of a running server. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/pg_db.h"
#include "base/result.h"

namespace tmcra::memd {

inline constexpr const char* kPermRead = "memory:read";
inline constexpr const char* kPermWrite = "memory:write";
inline constexpr const char* kPermFeedback = "memory:feedback";
// Destructive or wholesale reads: never in a key's default set (docs/memd.md, "Maintenance
// endpoints").
inline constexpr const char* kPermDelete = "memory:delete";
inline constexpr const char* kPermExport = "memory:export";

// The permissions a key may hold.
const std::vector<std::string>& KnownPermissions();
// The set a new key gets without --permissions: read, write and feedback.
const std::vector<std::string>& DefaultPermissions();

struct ApiKey {
  std::string key_id;
  std::vector<std::string> permissions;
  std::vector<std::string> scope_names;  // exact names; empty with no prefixes: any scope
  std::vector<std::string> scope_prefixes;
  std::string label;
  double created_at = 0;
  std::optional<double> revoked_at;

  bool Has(std::string_view permission) const;
  // True when the key may act on `scope` (no restriction, an exact name or a prefix matches).
  bool AllowsScope(std::string_view scope) const;
  // For `keys list`: everything but the secret (which is not even stored).
  nlohmann::json ToJson() const;
};

struct NewKeyRequest {
  // std::nullopt: the default set (DefaultPermissions); an empty list is an error, never "all".
  std::optional<std::vector<std::string>> permissions;
  std::vector<std::string> scope_names;
  std::vector<std::string> scope_prefixes;
  std::string label;
};

struct CreatedKey {
  ApiKey key;
  std::string token;  // tmcra_<key_id>.<secret>: shown once, never stored
};

// The parts of a bearer token, or std::nullopt when it is not shaped like one of our keys.
struct ParsedToken {
  std::string key_id;
  std::string secret;
};
std::optional<ParsedToken> ParseToken(std::string_view token);

// `bytes` random bytes from getrandom(2), as lower-case hex (aborts without an entropy source).
std::string RandomHex(size_t bytes);

// Equality of two strings in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// One record the server keeps beside the keys, shared by every memd on the store: of the OAuth
// authorization server (memd/oauth.h) a client, an authorization code, an access or refresh
// token, or the mark a used code or refresh token leaves (`id` is the SHA-256 of the secret,
// never the secret; `family` names the grant a code began, shared by every token issued from
// it); of the MCP endpoint the answer of a tool call that outlasted its POST (memd/mcp_streams.h).
struct ServerRecord {
  std::string kind;
  std::string id;
  std::string data;  // JSON text
  std::string family;
  double expires_at = 0;
};

class KeyRows;  // where the keys are stored (memd/key_rows.h)

class KeyStore {
 public:
  // Opens (creating) `<data_dir>/keys.db`.
  [[nodiscard]] static Result<std::unique_ptr<KeyStore>> Open(const std::string& data_dir);
  // Opens the keys of a PostgreSQL database, creating or migrating its tables (errors as
  // pg::Connection::Open's: a refused password is kPermissionDenied, a server that is down
  // kUnavailable).
  [[nodiscard]] static Result<std::unique_ptr<KeyStore>> OpenPostgres(
      const pg::ConnectOptions& options);
  ~KeyStore();
  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  // Validates the request (known permissions, valid scope names and prefixes) and stores a new
  // key. Errors are kInvalidArgument with a message for the person at the command line.
  [[nodiscard]] Result<CreatedKey> Create(const NewKeyRequest& request);
  [[nodiscard]] Result<std::vector<ApiKey>> List();
  // false: no such key. Revoking a revoked key keeps its first revocation time.
  [[nodiscard]] Result<bool> Revoke(std::string_view key_id);
  // The key a bearer token names when the token is well-formed, the key exists, is not revoked
  // and its secret matches; otherwise no key and, for the log only, why (the client is told
  // 401 without saying which). An Error only when the store cannot be read.
  struct AuthOutcome {
    std::optional<ApiKey> key;
    std::string reason;  // "malformed token", "unknown key <id>", "revoked key <id>", ...
  };
  [[nodiscard]] Result<AuthOutcome> Authenticate(std::string_view token);
  // A random secret of the server (64 hex digits) named `name`, made on first use and kept in the
  // store: every memd on the same store, before and after a restart, gets the same one. Used to
  // sign what the server hands out and reads back (memd/mcp_session.h). Never logged.
  [[nodiscard]] Result<std::string> ServerSecret(std::string_view name);
  // Server records, in the same store as the keys (so every memd on it shares them):
  // PutRecord stores one (replacing one of that kind and id, whose making time it keeps); GetRecord
  // finds one that has not expired; TakeRecord finds and deletes it in one step (a code or refresh
  // token is used once, even by two instances at once); DropRecordFamily deletes every record of a
  // grant (revocation); CountRecords counts records of a kind made since `since` (Unix seconds;
  // rate limits); DropExpiredRecords deletes what expired.
  [[nodiscard]] Status PutRecord(const ServerRecord& record);
  [[nodiscard]] Result<std::optional<ServerRecord>> GetRecord(std::string_view kind,
                                                              std::string_view id);
  [[nodiscard]] Result<std::optional<ServerRecord>> TakeRecord(std::string_view kind,
                                                               std::string_view id);
  [[nodiscard]] Status DropRecordFamily(std::string_view family);
  [[nodiscard]] Result<int64_t> CountRecords(std::string_view kind, double since);
  [[nodiscard]] Status DropExpiredRecords();
  // The key with this id (revoked or not), for the --local identity check.
  [[nodiscard]] Result<std::optional<ApiKey>> Find(std::string_view key_id);

 private:
  explicit KeyStore(std::unique_ptr<KeyRows> rows);

  std::unique_ptr<KeyRows> rows_;
};

}  // namespace tmcra::memd
