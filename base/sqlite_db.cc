#include "base/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/private_dirs.h"
#include "base/version.h"

namespace tmcra::db {

bool ReadVarint(std::string_view bytes, size_t& at, uint64_t& out) {
  uint64_t v = 0;
  for (int i = 0; i < 9; ++i) {
    if (at >= bytes.size()) return false;
    const auto byte = static_cast<unsigned char>(bytes[at++]);
    if (i == 8) {
      out = (v << 8) | byte;
      return true;
    }
    v = (v << 7) | (byte & 0x7fu);
    if ((byte & 0x80u) == 0) {
      out = v;
      return true;
    }
  }
  return false;
}

namespace {

// Process-wide SQLite settings, made once before the first connection (sqlite3_config is
// refused after sqlite3_initialize, which the first open does; a refusal changes nothing).
// Memory statistics off: with them every sqlite3_malloc and sqlite3_free takes one global
// mutex, which the recalls of tmcra-memd's threads contend on (futex waits in a profile of
// 16 concurrent recalls). Nothing here reads sqlite3_memory_used or sets a soft heap limit.
void ConfigureSqliteOnce() {
  static std::once_flag once;
  std::call_once(once, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}

Error MapError(int rc, sqlite3* db, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Error::Unavailable(message);
    case SQLITE_CONSTRAINT:
      return Error::Conflict(message);
    case SQLITE_FULL:  // the disk or the file system's quota: writes work again once there is room
      return Error::StorageFull(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Error{Errc::kDataLoss, false, message};
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
      return Error{Errc::kPermissionDenied, false, message};
    default:
      return Error::Internal(message);
  }
}

}  // namespace

Statement::Statement(Statement&& other) noexcept
    : stmt_(other.stmt_),
      db_(other.db_),
      cache_(std::move(other.cache_)),
      sql_(std::move(other.sql_)),
      bind_error_(std::move(other.bind_error_)) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    stmt_ = other.stmt_;
    db_ = other.db_;
    cache_ = std::move(other.cache_);
    sql_ = std::move(other.sql_);
    bind_error_ = std::move(other.bind_error_);
    other.stmt_ = nullptr;
  }
  return *this;
}

Statement::~Statement() { Release(); }

struct StatementCache {
  std::mutex mu;
  std::unordered_map<std::string, sqlite3_stmt*> idle;
  bool closed = false;  // set by ~Database under mu: nothing is returned any more

  // Keeps `stmt` for reuse, or finalizes it.
  void Return(std::string sql, sqlite3_stmt* stmt) {
    // Reset: a statement left mid-way would keep its read transaction open.
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    {
      std::lock_guard lock(mu);
      if (!closed && idle.size() < Database::kCachedStatements &&
          idle.emplace(std::move(sql), stmt).second) {
        return;
      }
    }
    sqlite3_finalize(stmt);  // full, closed, or this text is kept already
  }
};

void Statement::Release() {
  if (stmt_ == nullptr) return;
  if (auto cache = cache_.lock()) {
    cache->Return(std::move(sql_), stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

Statement& Statement::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::Bind(int index, std::string_view text) {
  const int rc =
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  const int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::BindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::BindPointer(int index, void* pointer, const char* type) {
  const int rc = sqlite3_bind_pointer(stmt_, index, pointer, type, nullptr);
  if (rc != SQLITE_OK && bind_error_) bind_error_ = MapError(rc, db_, "bind");
  return *this;
}

Statement& Statement::Bind(int index, const std::optional<std::string>& text) {
  return text ? Bind(index, std::string_view(*text)) : BindNull(index);
}

Result<bool> Statement::Step() {
  if (!bind_error_) return bind_error_.error();
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error error = MapError(rc, db_, "step");
  sqlite3_reset(stmt_);
  return error;
}

Status Statement::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return row.error();
    if (!*row) return Ok();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = Ok();
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }
bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
std::string Statement::Text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::Blob(int column) const {
  const void* bytes = sqlite3_column_blob(stmt_, column);
  if (bytes == nullptr) return {};
  return std::string(static_cast<const char*>(bytes),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

namespace {

Error StoreRefused(const std::string& path, const std::string& why) {
  return Error{Errc::kPermissionDenied, false, "cannot open the store " + path + ": " + why};
}

// The directory holding `path`.
std::string DirectoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// One of the store's files, if it exists: not a symbolic link, owned by this user or root, not
// writable by group or others (refused: its content may have been changed, so the user
// decides); readable by them, it is made private (only group and other bits go).
Status CheckStoreFile(const std::string& file) {
  struct stat st {};
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return Ok();
    return StoreRefused(file, std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return StoreRefused(file, "a symbolic link is not followed");
  if (!S_ISREG(st.st_mode)) return StoreRefused(file, "not a regular file");
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    return StoreRefused(file, "it is owned by uid " + std::to_string(st.st_uid) +
                                  ", not by this user (uid " + std::to_string(geteuid()) + ")");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return StoreRefused(file, "permissions " + OctalMode(st.st_mode) +
                                  " let group or others change it; check its content, then run: "
                                  "chmod 600 " +
                                  file);
  }
  if ((st.st_mode & 077) != 0 && chmod(file.c_str(), st.st_mode & 0700) != 0) {
    return StoreRefused(file, std::string("cannot make it private: ") + std::strerror(errno));
  }
  return Ok();
}

// The store's directory and files, before SQLite opens anything (SECURITY.md, "Other local
// users").
Status CheckStore(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  if (auto s = CheckDirClosedToOthers(dir, StickyDirs::kRefused); !s) {
    return StoreRefused(path, s.error().message);
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    if (auto s = CheckStoreFile(path + suffix); !s) return s;
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const Options& options) {
  if (!options.read_only) {
    const auto slash = options.path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      if (auto s = MakePrivateDirs(options.path.substr(0, slash)); !s) return s.error();
    }
  }
  if (auto s = CheckStore(options.path); !s) return s.error();
  if (!options.read_only) {
    // Create the file 0600 ourselves (SQLite would use 0644 less the umask), but only when it
    // does not exist yet. Never open and close an existing database file here: POSIX drops
    // every lock a process holds on a file when any of its descriptors for that file is
    // closed, so closing one would silently release the locks of this process's other SQLite
    // connections to it. Another process could then think itself alone, check-point and delete
    // the WAL under them: lost commits and a corrupt file. The mutex keeps a creation in one
    // thread from closing under a connection another thread opens on the new file.
    static std::mutex create_mu;
    std::lock_guard lock(create_mu);
    const int fd =
        open(options.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      close(fd);
    } else if (errno != EEXIST) {
      return Error{Errc::kPermissionDenied, false,
                   "cannot open " + options.path + ": " + std::strerror(errno)};
    } else {
      struct stat st {};
      if (lstat(options.path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) {
        return Error{Errc::kPermissionDenied, false,
                     "cannot open " + options.path + ": a symbolic link is not followed"};
      }
    }
  }
  ConfigureSqliteOnce();
  sqlite3* raw = nullptr;
  const int flags =
      (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(options.path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error error = MapError(rc, raw, "open " + options.path);
    sqlite3_close(raw);
    return error;
  }
  std::unique_ptr<Database> db(new Database(raw, options.path));
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  // Switching a brand-new file to WAL can fail with SQLITE_BUSY at once, without the busy
  // handler, while another process creates the same file: retry it within the busy timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  for (;;) {
    auto wal = db->Exec(options.read_only ? "SELECT 1" : "PRAGMA journal_mode=WAL");
    if (wal) break;
    if (wal.error().code != Errc::kUnavailable || std::chrono::steady_clock::now() >= deadline) {
      return wal.error();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string pragmas = "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;";
  if (options.cache_kib > 0) {
    pragmas += " PRAGMA cache_size=-" + std::to_string(options.cache_kib) + ";";
  }
  if (options.mmap_bytes > 0) {
    pragmas += " PRAGMA mmap_size=" + std::to_string(options.mmap_bytes) + ";";
  }
  if (auto s = db->Exec(pragmas); !s) return s.error();
  return db;
}

Database::Database(sqlite3* db, std::string path)
    : db_(db), path_(std::move(path)), cache_(std::make_shared<StatementCache>()) {}

Database::~Database() {
  {
    std::lock_guard lock(cache_->mu);
    cache_->closed = true;
    for (auto& [sql, stmt] : cache_->idle) sqlite3_finalize(stmt);
    cache_->idle.clear();
  }
  // Statements still held elsewhere are finalized by their owners; sqlite3_close_v2 keeps the
  // connection until the last one is.
  sqlite3_close_v2(db_);
}

Status Database::Exec(std::string_view sql) {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Ok();
  sqlite3_free(message);
  return MapError(rc, db_, "exec");
}

Result<Statement> Database::Prepare(std::string_view sql) {
  std::string text(sql);
  {
    std::lock_guard lock(cache_->mu);
    if (auto it = cache_->idle.find(text); it != cache_->idle.end()) {
      sqlite3_stmt* stmt = it->second;
      cache_->idle.erase(it);
      return Statement(stmt, db_, cache_, std::move(text));
    }
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_, text.data(), static_cast<int>(text.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return MapError(rc, db_, "prepare");
  if (stmt == nullptr) return Statement(nullptr, db_, {}, {});  // only a comment or blanks
  return Statement(stmt, db_, cache_, std::move(text));
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

RelaxedDurability::RelaxedDurability(Database& db) : db_(db) {
  (void)db_.Exec("PRAGMA synchronous=NORMAL");
}

RelaxedDurability::~RelaxedDurability() { (void)db_.Exec("PRAGMA synchronous=FULL"); }

Result<int64_t> Database::QueryInt(std::string_view sql) {
  auto st = Prepare(sql);
  if (!st) return st.error();
  auto row = st->Step();
  if (!row) return row.error();
  return *row && !st->IsNull(0) ? st->Int(0) : 0;
}

Status Database::RunCached(std::string_view sql) {
  auto st = Prepare(sql);
  if (!st) return st.error();
  return st->Run();  // a failed step resets the statement before it goes back to the cache
}

Result<Transaction> Transaction::Immediate(Database& db) {
  if (auto s = db.RunCached("BEGIN IMMEDIATE"); !s) return s.error();
  return Transaction(&db);
}

Result<Transaction> Transaction::Deferred(Database& db) {
  if (auto s = db.RunCached("BEGIN"); !s) return s.error();
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_ != nullptr && !db_->RunCached("ROLLBACK")) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  Database* db = db_;
  db_ = nullptr;
  if (auto s = db->RunCached("COMMIT"); !s) {
    if (!db->RunCached("ROLLBACK")) (void)db->Exec("ROLLBACK");
    return s;
  }
  return Ok();
}

namespace {

// Which version of the product first wrote schema `schema`, kept in the store (schema_info), so
// that an older binary can say which version to run.
Status NoteSchemaVersion(Database& db, int64_t schema) {
  if (auto s = db.Exec(
          "CREATE TABLE IF NOT EXISTS schema_info(name TEXT PRIMARY KEY, value TEXT NOT NULL)");
      !s) {
    return s;
  }
  auto note = db.Prepare("INSERT OR IGNORE INTO schema_info(name, value) VALUES(?, ?)");
  if (!note) return note.error();
  note->Bind(1, "schema_" + std::to_string(schema) + "_written_by").Bind(2, kVersion);
  return note->Run();
}

// The refusal of a store whose schema `current` is newer than this binary's `target`.
Status NewerSchema(Database& db, std::string_view what, int64_t current, int64_t target) {
  std::string version;
  auto note = db.Prepare("SELECT value FROM schema_info WHERE name = ?");
  if (note) {
    note->Bind(1, "schema_" + std::to_string(current) + "_written_by");
    if (auto row = note->Step(); row && *row) version = note->Text(0);
  }
  std::string message = std::string(what) + " was written by a newer version (schema " +
                        std::to_string(current) + "; this is " + kVersion + ", schema " +
                        std::to_string(target) + ")";
  message += version.empty() ? ": run the version that wrote it, or a newer one"
                             : ": run " + std::string(kProductName) + " " + version +
                                   " or newer (nothing was changed)";
  return Error{Errc::kDataLoss, false, std::move(message)};
}

}  // namespace

Status Migrate(Database& db, std::span<const char* const> steps, std::string_view what) {
  auto tx = Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto version = db.Prepare("PRAGMA user_version");
  if (!version) return version.error();
  auto row = version->Step();
  if (!row) return row.error();
  const int64_t current = version->Int(0);
  const auto target = static_cast<int64_t>(steps.size());
  if (current > target) return NewerSchema(db, what, current, target);
  for (int64_t v = current; v < target; ++v) {
    if (auto s = db.Exec(steps[static_cast<size_t>(v)]); !s) return s;
  }
  if (current != target) {
    if (auto s = db.Exec("PRAGMA user_version=" + std::to_string(target)); !s) return s;
    if (auto s = NoteSchemaVersion(db, target); !s) return s;
  }
  return tx->Commit();
}

}  // namespace tmcra::db
