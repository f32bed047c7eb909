// A small RAII layer over SQLite: Database, Statement and Transaction, with every failure
// mapped to an Error in one place (SQLITE_BUSY/LOCKED are retryable, CONSTRAINT is a
// conflict, CORRUPT/NOTADB are data loss).
//
// Files are private: Open() creates missing directories 0700 and the database file 0600 before
// SQLite touches them (SQLite gives its -wal and -shm files the database file's mode). Every
// connection runs in WAL mode with synchronous=FULL and a busy timeout, so several processes can
// share one file; writers must use Transaction::Immediate so a lock wait goes through the busy
// handler instead of failing on upgrade.
//
// Not thread-safe: one Database per thread, or guard it with a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tmcra::db {

// Reads one of SQLite's varints (as FTS5 stores sizes and structure fields: big-endian groups
// of 7 bits, the high bit set on every byte but the last; a ninth byte gives all 8 bits) from
// `bytes` at `at`, and moves `at` past it. False when the bytes end first.
bool ReadVarint(std::string_view bytes, size_t& at, uint64_t& out);

class Database;
struct StatementCache;  // a connection's idle statements (sqlite_db.cc)

class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Bind by 1-based index. Text is copied by SQLite.
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view text);
  Statement& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  Statement& Bind(int index, const std::string& text) {
    return Bind(index, std::string_view(text));
  }
  Statement& BindBlob(int index, std::string_view bytes);  // a BLOB, copied by SQLite
  Statement& BindNull(int index);
  Statement& Bind(int index, const std::optional<std::string>& text);
  // Binds a pointer that only a function asking for the same `type` can see
  // (sqlite3_bind_pointer); `type` must outlive the statement's run (a string literal).
  Statement& BindPointer(int index, void* pointer, const char* type);

  // true: a row is ready; false: done.
  [[nodiscard]] Result<bool> Step();
  // Runs to completion (for statements that return no rows).
  [[nodiscard]] Status Run();
  // Clears the bindings and rewinds, ready to run again.
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  std::string Blob(int column) const;  // a BLOB's bytes (or a text's)
  bool IsNull(int column) const;

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, sqlite3* db, std::weak_ptr<StatementCache> cache, std::string sql)
      : stmt_(stmt), db_(db), cache_(std::move(cache)), sql_(std::move(sql)) {}
  // Back to its connection's cache (reset, bindings cleared), or finalized when the cache is
  // full or the Database is gone (sqlite3_close_v2 keeps the connection until then).
  void Release();

  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
  std::weak_ptr<StatementCache> cache_;
  std::string sql_;
  Status bind_error_;
};

class Database {
 public:
  struct Options {
    std::string path;
    int busy_timeout_ms = 10000;
    bool read_only = false;
    int cache_kib = 0;  // page cache per connection; 0 keeps SQLite's default (2 MiB)
    // Reads the file through a memory map of up to this many bytes (PRAGMA mmap_size); 0 keeps
    // SQLite's default (no map). Pages come from the kernel's page cache, shared by every
    // connection, instead of being read(2) into each connection's own cache.
    int64_t mmap_bytes = 0;
  };

  [[nodiscard]] static Result<std::unique_ptr<Database>> Open(const Options& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows.
  [[nodiscard]] Status Exec(std::string_view sql);
  // Runs one statement through the statement cache (no parse after the first time): for the
  // transaction statements every read and write runs.
  [[nodiscard]] Status RunCached(std::string_view sql);
  // A compiled statement. Statements are kept for reuse when destroyed (reset, bindings
  // cleared; up to kCachedStatements distinct texts per connection), so preparing the same SQL
  // again costs a lookup. A Statement may outlive its Database (it is then finalized).
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  static constexpr size_t kCachedStatements = 64;
  // The first column of `sql`'s first row as an integer (through the statement cache); 0 when
  // there is no row or the value is NULL (e.g. `SELECT max(...)` of an empty table).
  [[nodiscard]] Result<int64_t> QueryInt(std::string_view sql);

  int64_t LastInsertRowId() const;
  int Changes() const;
  const std::string& path() const { return path_; }
  // The SQLite connection, for registering functions on it (memory/bm25.cc). Not for running
  // statements around Prepare's cache.
  sqlite3* handle() const { return db_; }

 private:
  Database(sqlite3* db, std::string path);

  sqlite3* db_;
  std::string path_;
  std::shared_ptr<StatementCache> cache_;
};

// Lowers a connection's durability from synchronous=FULL to NORMAL while it lives: its commits
// survive a crash of the process (SIGKILL) but not of the machine. Only for writes that can be
// lost on power failure without losing anything acknowledged (claims, leases, progress marks
// that a replay by idempotency key recreates). Not thread-safe, like the Database.
class RelaxedDurability {
 public:
  explicit RelaxedDurability(Database& db);
  ~RelaxedDurability();
  RelaxedDurability(const RelaxedDurability&) = delete;
  RelaxedDurability& operator=(const RelaxedDurability&) = delete;

 private:
  Database& db_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted (every error path).
class Transaction {
 public:
  [[nodiscard]] static Result<Transaction> Immediate(Database& db);
  [[nodiscard]] static Result<Transaction> Deferred(Database& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  [[nodiscard]] Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

// Brings the schema to the last of `steps` in one IMMEDIATE transaction: `PRAGMA user_version`
// counts the steps already applied, each later step runs once, in order. A file whose version is
// beyond `steps` was written by a newer build and is refused (kDataLoss), naming `what` ("the
// outbox", ...). Several processes may migrate at once: the transaction serialises them.
[[nodiscard]] Status Migrate(Database& db, std::span<const char* const> steps,
                             std::string_view what);

}  // namespace tmcra::db
