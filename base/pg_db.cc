#include "base/pg_db.h"

#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tmcra::pg {

namespace {

// libpq's messages span lines ("...failed: FATAL: ...\n\tIs the server running...?"): one line.
std::string OneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A statement's failure by its SQLSTATE (PostgreSQL's appendix A).
Error Classify(std::string_view sqlstate, std::string message) {
  message = "PostgreSQL: " + message + " (SQLSTATE " + std::string(sqlstate) + ")";
  if (StartsWith(sqlstate, "08") || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03" || sqlstate == "57014" || sqlstate == "55P03") {
    return Error::Unavailable(std::move(message));
  }
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return {Errc::kConflict, true, std::move(message)};
  }
  if (sqlstate == "23505") return Error::Conflict(std::move(message));
  if (sqlstate == "53100") return Error::StorageFull(std::move(message));
  if (StartsWith(sqlstate, "53")) return Error::Unavailable(std::move(message));
  if (StartsWith(sqlstate, "28")) return {Errc::kPermissionDenied, false, std::move(message)};
  if (sqlstate == "3D000") return Error::NotFound(std::move(message));
  return Error::Internal(std::move(message));
}

// A failed connection attempt: a refused password or role is not worth retrying.
Error ConnectError(std::string_view libpq_message) {
  std::string message = "PostgreSQL: " + OneLine(libpq_message);
  for (const char* refusal : {"password authentication failed", "no password supplied", "role \"",
                              "pg_hba.conf rejects", "certificate"}) {
    if (message.find(refusal) != std::string::npos) {
      return {Errc::kPermissionDenied, false, std::move(message)};
    }
  }
  if (message.find("database \"") != std::string::npos &&
      message.find("does not exist") != std::string::npos) {
    return Error::NotFound(std::move(message));
  }
  return Error::Unavailable(std::move(message));
}

struct ConninfoDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using ConninfoPtr = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

Result<ConninfoPtr> Parse(std::string_view conninfo) {
  char* error = nullptr;
  ConninfoPtr parsed(PQconninfoParse(std::string(conninfo).c_str(), &error));
  if (!parsed) {
    // libpq's message may quote the setting, password and all: it is not passed on.
    PQfreemem(error);
    return Error::Invalid(
        "the database setting is not a PostgreSQL URI or conninfo that libpq can parse (its "
        "text is not repeated here: it may hold a password)");
  }
  return parsed;
}

std::string OptionOf(const ConninfoPtr& parsed, std::string_view keyword) {
  for (auto* o = parsed.get(); o->keyword != nullptr; ++o) {
    if (keyword == o->keyword && o->val != nullptr) return o->val;
  }
  return {};
}

Error StatementError(pg_conn* conn, pg_result* result) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = result ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (state == nullptr || PQstatus(conn) == CONNECTION_BAD) {
    return Error::Unavailable("PostgreSQL: the connection was lost: " +
                              OneLine(PQerrorMessage(conn)));
  }
  return Classify(state, primary ? primary : OneLine(PQerrorMessage(conn)));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status CheckConninfo(std::string_view conninfo) {
  if (conninfo.empty()) return Error::Invalid("the database setting is empty");
  auto parsed = Parse(conninfo);
  if (!parsed) return parsed.error();
  if (!OptionOf(*parsed, "password").empty()) {
    return Error::Invalid(
        "the database setting holds a password: command lines are visible to every user of "
        "the machine; give the password through PGPASSWORD, a .pgpass file (PGPASSFILE) or "
        "--database-password-file");
  }
  return Ok();
}

std::string DescribeConninfo(std::string_view conninfo) {
  auto parsed = Parse(conninfo);
  if (!parsed) return "(unparsable)";
  std::string host = OptionOf(*parsed, "host");
  std::string port = OptionOf(*parsed, "port");
  std::string db = OptionOf(*parsed, "dbname");
  return (host.empty() ? "(default host)" : host) + ":" + (port.empty() ? "5432" : port) + "/" +
         (db.empty() ? "(default database)" : db);
}

Result<std::string> ReadPasswordFile(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return Error::Invalid("cannot read the password file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Error::Invalid("the password file " + path + " is not a file");
  if (st.st_uid != geteuid()) {
    return Error::Invalid("the password file " + path + " belongs to another user");
  }
  if ((st.st_mode & 077) != 0) {
    return Error::Invalid("the password file " + path +
                          " is readable or writable by others: chmod 600 it");
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return Error::Invalid("the password file " + path + " is empty or unreadable");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return Error::Invalid("the password file " + path + " is empty");
  return line;
}

Param::Param(double number) : kind(Kind::kText) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, number);
  value.assign(buf, ec == std::errc() ? end : buf);
}

Param Param::Bytes(std::string_view bytes) {
  Param p;
  p.kind = Kind::kBytes;
  p.value = std::string(bytes);
  return p;
}

Rows::Rows(pg_result* result) : result_(result) {}
Rows::~Rows() { PQclear(result_); }
Rows::Rows(Rows&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
Rows& Rows::operator=(Rows&& other) noexcept {
  if (this != &other) {
    PQclear(result_);
    result_ = other.result_;
    other.result_ = nullptr;
  }
  return *this;
}

int Rows::size() const { return result_ ? PQntuples(result_) : 0; }
bool Rows::IsNull(int row, int column) const { return PQgetisnull(result_, row, column) != 0; }
std::string_view Rows::Text(int row, int column) const {
  return {PQgetvalue(result_, row, column), static_cast<size_t>(PQgetlength(result_, row, column))};
}
int64_t Rows::Int(int row, int column) const {
  const std::string_view text = Text(row, column);
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}
double Rows::Double(int row, int column) const {
  const std::string_view text = Text(row, column);
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}
std::string Rows::Bytes(int row, int column) const {
  const std::string_view text = Text(row, column);  // "\x" then two hex digits per byte
  std::string out;
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x') return out;
  out.reserve((text.size() - 2) / 2);
  for (size_t i = 2; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<char>(HexValue(text[i]) * 16 + HexValue(text[i + 1])));
  }
  return out;
}
int64_t Rows::Affected() const {
  const char* text = result_ ? PQcmdTuples(result_) : "";
  int64_t value = 0;
  std::from_chars(text, text + std::strlen(text), value);
  return value;
}

Connection::Connection(pg_conn* conn, ConnectOptions options)
    : conn_(conn), options_(std::move(options)) {}
Connection::~Connection() { PQfinish(conn_); }

Result<std::unique_ptr<Connection>> Connection::Open(const ConnectOptions& options) {
  if (auto s = CheckConninfo(options.conninfo); !s) return s.error();
  const std::string timeout = std::to_string(options.connect_timeout_seconds);
  // TCP keepalives and a send timeout: a server or network that goes silent breaks the
  // connection within about a minute instead of the kernel's two hours, so a statement waiting
  // on it fails (retryably) rather than holding its caller.
  std::vector<const char*> keys{"dbname",           "application_name", "connect_timeout",
                                "keepalives",       "keepalives_idle",  "keepalives_interval",
                                "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> values{options.conninfo.c_str(),
                                  options.application_name.c_str(),
                                  timeout.c_str(),
                                  "1",
                                  "30",
                                  "10",
                                  "3",
                                  "60000"};
  if (options.password) {
    keys.push_back("password");
    values.push_back(options.password->c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // expand_dbname=1: the first "dbname" value is the whole URI or conninfo; later keys
  // override what it says (application_name, connect_timeout, password).
  pg_conn* conn = PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn == nullptr) return Error::Internal("PostgreSQL: out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    Error error = ConnectError(PQerrorMessage(conn));
    PQfinish(conn);
    return error;
  }
  return std::unique_ptr<Connection>(new Connection(conn, options));
}

bool Connection::healthy() const { return PQstatus(conn_) == CONNECTION_OK; }
int Connection::server_version() const { return PQserverVersion(conn_); }

Status Connection::Reconnect() {
  auto fresh = Open(options_);
  if (!fresh) return fresh.error();
  std::swap(conn_, (*fresh)->conn_);
  return Ok();
}

Result<Rows> Connection::Exec(std::string_view sql, std::span<const Param> params) {
  if (!healthy()) {
    if (auto s = Reconnect(); !s) return s.error();
  }
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& p : params) {
    // libpq reads a text parameter up to its first NUL, and PostgreSQL text cannot hold one:
    // refused rather than cut short.
    if (p.kind == Param::Kind::kText && p.value.find('\0') != std::string::npos) {
      return Error::Invalid(
          "PostgreSQL: a text value holds a NUL character, which it cannot store");
    }
    values.push_back(p.kind == Param::Kind::kNull ? nullptr : p.value.c_str());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.kind == Param::Kind::kBytes ? 1 : 0);
  }
  Rows rows(PQexecParams(conn_, std::string(sql).c_str(), static_cast<int>(params.size()), nullptr,
                         values.data(), lengths.data(), formats.data(), 0));
  pg_result* result = rows.result_;
  const auto status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return StatementError(conn_, result);
  }
  return rows;
}

Status Connection::Run(std::string_view sql) {
  if (!healthy()) {
    if (auto s = Reconnect(); !s) return s.error();
  }
  Rows rows(PQexec(conn_, std::string(sql).c_str()));
  pg_result* result = rows.result_;
  const auto status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return StatementError(conn_, result);
  }
  return Ok();
}

Result<Transaction> Transaction::Begin(Connection& conn, std::string_view begin) {
  if (auto s = conn.Run(begin); !s) return s.error();
  return Transaction(&conn);
}

Transaction::Transaction(Transaction&& other) noexcept : conn_(other.conn_) {
  other.conn_ = nullptr;
}

Transaction::~Transaction() {
  if (conn_ != nullptr && conn_->healthy()) (void)conn_->Run("ROLLBACK");
}

Status Transaction::Commit() {
  Connection* conn = conn_;
  conn_ = nullptr;
  return conn->Run("COMMIT");
}

struct ConnectionPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Connection>> idle;  // guarded by mu
  size_t lent = 0;                                // guarded by mu
};

ConnectionPool::ConnectionPool(ConnectOptions options, size_t max_size)
    : options_(std::move(options)),
      max_size_(max_size == 0 ? 1 : max_size),
      state_(std::make_unique<State>()) {}
ConnectionPool::~ConnectionPool() = default;

ConnectionPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->GiveBack(std::move(conn_));
}

Result<ConnectionPool::Lease> ConnectionPool::Borrow() {
  {
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] { return !state_->idle.empty() || state_->lent < max_size_; });
    ++state_->lent;
    if (!state_->idle.empty()) {
      auto conn = std::move(state_->idle.back());
      state_->idle.pop_back();
      return Lease(this, std::move(conn));
    }
  }
  auto conn = Connection::Open(options_);
  if (!conn) {
    GiveBack(nullptr);
    return conn.error();
  }
  return Lease(this, std::move(*conn));
}

void ConnectionPool::GiveBack(std::unique_ptr<Connection> conn) {
  {
    std::lock_guard lock(state_->mu);
    --state_->lent;
    if (conn && conn->healthy()) {
      state_->idle.push_back(std::move(conn));
    } else if (conn) {
      // A broken connection most often means the server restarted: the idle ones are broken
      // too, and are dropped rather than lent to fail one by one.
      state_->idle.clear();
    }
  }
  state_->cv.notify_one();
}

Status Migrate(Connection& conn, std::string_view component, std::span<const char* const> steps,
               std::string_view what) {
  for (;;) {
    auto tx = Transaction::Begin(conn);
    if (!tx) return tx.error();
    // One migrating process at a time; the others wait here, then find the work done. The lock
    // comes before the table's creation, which two first starts would otherwise race on.
    auto locked = conn.Exec("SELECT pg_advisory_xact_lock(hashtext('tmcra_schema'))");
    if (!locked) return locked.error();
    if (auto s = conn.Run("CREATE TABLE IF NOT EXISTS tmcra_schema("
                          "component TEXT PRIMARY KEY, version INTEGER NOT NULL)");
        !s) {
      return s.error();
    }
    auto row =
        conn.Exec("SELECT version FROM tmcra_schema WHERE component = $1", {Param(component)});
    if (!row) return row.error();
    const int64_t version = row->size() == 0 ? 0 : row->Int(0, 0);
    const auto known = static_cast<int64_t>(steps.size());
    if (version > known) {
      return Error::Invalid(std::string(what) + " in PostgreSQL is at schema version " +
                            std::to_string(version) + ", newer than this build knows (" +
                            std::to_string(known) + "): run a newer tmcra-memd");
    }
    if (version == known) return tx->Commit();
    if (auto s = conn.Run(steps[static_cast<size_t>(version)]); !s) return s.error();
    auto mark = conn.Exec(
        "INSERT INTO tmcra_schema(component, version) VALUES($1, $2) "
        "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
        {Param(component), Param(version + 1)});
    if (!mark) return mark.error();
    if (auto s = tx->Commit(); !s) return s.error();
  }
}

}  // namespace tmcra::pg
