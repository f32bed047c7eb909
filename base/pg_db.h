// A PostgreSQL connection through libpq, with errors as values.
//
// What it promises:
//   * Connection settings are a libpq URI or conninfo string that holds no password: a password
//     comes from PGPASSWORD, a .pgpass file (PGPASSFILE) or a 0600 file of the caller's
//     (ReadPasswordFile), never from a command line. TLS is libpq's own (sslmode, sslrootcert).
//   * Every statement runs with parameters sent apart from its text (PQexecParams), in text
//     format, or binary for Param::Bytes.
//   * Failures are classified once, here, by SQLSTATE: a lost connection, a server shutting
//     down or starting, a serialization failure or deadlock are retryable; a full disk is
//     kStorageFull; a unique violation is kConflict (not retryable: the caller reads the row
//     that won); a refused password is kPermissionDenied. Messages are libpq's primary text on
//     one line, with no password and no parameter values.
//   * A connection found broken is re-established by the next Exec (the statement that found
//     it broken fails, retryable, and is not re-sent: the caller decides whether it may be).
//     Connections use TCP keepalives and a 60 s send timeout, so a silent server breaks them
//     within about a minute; they keep no session settings (transaction poolers fit).
//   * A text parameter holding a NUL character is refused (kInvalidArgument): PostgreSQL text
//     cannot hold one, and libpq would cut it short.
// Not thread-safe: one Connection per thread at a time (ConnectionPool hands them out).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

struct pg_conn;
struct pg_result;

namespace tmcra::pg {

struct ConnectOptions {
  std::string conninfo;                 // URI or key=value; CheckConninfo has accepted it
  std::optional<std::string> password;  // from ReadPasswordFile; else libpq's own sources
  std::string application_name = "tmcra";
  int connect_timeout_seconds = 10;
};

// Parses a URI or conninfo string; refuses one that libpq cannot parse or that carries a
// password (naming where a password goes instead).
[[nodiscard]] Status CheckConninfo(std::string_view conninfo);
// "host:port/dbname" of a conninfo string, for logs (never the user's options or password).
std::string DescribeConninfo(std::string_view conninfo);
// The password in `path`: a regular file of this user's, not readable or writable by others;
// its first line without the line end.
[[nodiscard]] Result<std::string> ReadPasswordFile(const std::string& path);

// One statement parameter: text, bytes (sent in binary, for BYTEA) or SQL NULL.
struct Param {
  enum class Kind { kText, kBytes, kNull };
  Kind kind = Kind::kNull;
  std::string value;

  Param() = default;
  Param(std::string_view text) : kind(Kind::kText), value(text) {}    // NOLINT: implicit on purpose
  Param(const std::string& text) : kind(Kind::kText), value(text) {}  // NOLINT
  Param(const char* text) : kind(Kind::kText), value(text) {}         // NOLINT
  Param(int64_t number) : kind(Kind::kText), value(std::to_string(number)) {}  // NOLINT
  Param(int number) : kind(Kind::kText), value(std::to_string(number)) {}      // NOLINT
  Param(double number);                                                        // NOLINT
  static Param Bytes(std::string_view bytes);
  static Param Null() { return Param(); }
};

// A statement's rows; values read in text format, except BYTEA columns read with Bytes.
class Rows {
 public:
  explicit Rows(pg_result* result);
  ~Rows();
  Rows(Rows&& other) noexcept;
  Rows& operator=(Rows&& other) noexcept;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;

  int size() const;
  bool IsNull(int row, int column) const;
  std::string_view Text(int row, int column) const;
  int64_t Int(int row, int column) const;        // 0 for NULL or not a number
  double Double(int row, int column) const;      // 0 for NULL or not a number
  std::string Bytes(int row, int column) const;  // a BYTEA column in PostgreSQL's hex form
  // The number of rows an INSERT, UPDATE or DELETE touched.
  int64_t Affected() const;

 private:
  friend class Connection;
  pg_result* result_;
};

class Connection {
 public:
  // Connects; kPermissionDenied for a refused password or user, kUnavailable (retryable) for
  // a server that is down, starting or unreachable, kInvalidArgument for bad settings.
  [[nodiscard]] static Result<std::unique_ptr<Connection>> Open(const ConnectOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] Result<Rows> Exec(std::string_view sql, std::span<const Param> params = {});
  [[nodiscard]] Result<Rows> Exec(std::string_view sql, std::initializer_list<Param> params) {
    return Exec(sql, std::span<const Param>(params.begin(), params.size()));
  }
  // Runs statements that take no parameters and whose rows are not wanted (several may be
  // separated by semicolons).
  [[nodiscard]] Status Run(std::string_view sql);
  // True until a statement finds the connection broken (the next Exec reconnects).
  bool healthy() const;
  // The server's version number (e.g. 150018 for 15.18).
  int server_version() const;

 private:
  Connection(pg_conn* conn, ConnectOptions options);
  Status Reconnect();

  pg_conn* conn_;
  ConnectOptions options_;
};

// A transaction on a connection: BEGIN now, ROLLBACK when destroyed without Commit.
class Transaction {
 public:
  [[nodiscard]] static Result<Transaction> Begin(Connection& conn,
                                                 std::string_view begin = "BEGIN");
  ~Transaction();
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  [[nodiscard]] Status Commit();

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;
};

// Connections to one database, opened on demand up to `max_size`; Borrow waits for one when all
// are lent. A broken connection given back is dropped, and the idle ones with it (the server
// has most likely restarted).
class ConnectionPool {
 public:
  ConnectionPool(ConnectOptions options, size_t max_size);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    Connection& operator*() { return *conn_; }
    Connection* operator->() { return conn_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };
  [[nodiscard]] Result<Lease> Borrow();
  const ConnectOptions& options() const { return options_; }

 private:
  void GiveBack(std::unique_ptr<Connection> conn);

  ConnectOptions options_;
  size_t max_size_;
  struct State;
  std::unique_ptr<State> state_;
};

// Applies the versioned schema `steps` of `component` (step i takes the schema from version i to
// i + 1; each step may hold several statements), each in its own transaction, under an advisory
// lock so that processes starting together migrate once. Refuses a schema newer than `steps`
// knows, naming `what`. The versions live in table tmcra_schema(component, version).
[[nodiscard]] Status Migrate(Connection& conn, std::string_view component,
                             std::span<const char* const> steps, std::string_view what);

}  // namespace tmcra::pg
