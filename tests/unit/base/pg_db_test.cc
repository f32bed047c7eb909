// base/pg_db against the suite's real PostgreSQL cluster (tests/support/pg_cluster.sh).
#include "base/pg_db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "tests/support/pg_test_cluster.h"
#include "tests/support/temp_dir.h"

using tmcra::Errc;
using tmcra::pg::Connection;
using tmcra::pg::ConnectionPool;
using tmcra::pg::Param;
using tmcra::testing::PgCluster;
using tmcra::testing::ScratchDatabase;

TEST_CASE("pg: statements take parameters apart from their text, NULL and bytes included") {
  ScratchDatabase db("params");
  auto conn = Connection::Open(db.Options());
  REQUIRE(conn);
  REQUIRE((*conn)->Run(
      "CREATE TABLE t(id BIGINT PRIMARY KEY, name TEXT, blob BYTEA, x DOUBLE PRECISION)"));
  const std::string bytes("\x00\x01\xff' \\x", 7);
  auto inserted = (*conn)->Exec("INSERT INTO t VALUES($1, $2, $3, $4), ($5, $6, NULL, NULL)",
                                {Param(int64_t{1}), Param("it's; DROP TABLE t"),
                                 Param::Bytes(bytes), Param(0.1), Param(2), Param::Null()});
  REQUIRE(inserted);
  CHECK(inserted->Affected() == 2);
  auto rows = (*conn)->Exec("SELECT id, name, blob, x FROM t ORDER BY id");
  REQUIRE(rows);
  REQUIRE(rows->size() == 2);
  CHECK(rows->Int(0, 0) == 1);
  CHECK(rows->Text(0, 1) == "it's; DROP TABLE t");
  CHECK(rows->Bytes(0, 2) == bytes);
  CHECK(rows->Double(0, 3) == 0.1);
  CHECK(rows->IsNull(1, 1));
  CHECK(rows->IsNull(1, 2));
  // Text cannot hold NUL: refused, never cut short.
  auto nul =
      (*conn)->Exec("INSERT INTO t(id, name) VALUES(3, $1)", {Param(std::string("a\0b", 3))});
  REQUIRE_FALSE(nul);
  CHECK(nul.error().code == Errc::kInvalidArgument);
}

TEST_CASE("pg: a password in the database setting is refused, in a URI or a conninfo") {
  for (const char* setting : {"postgresql://tmcra:hunter2@127.0.0.1/db",
                              "host=127.0.0.1 user=tmcra password=hunter2 dbname=db"}) {
    auto checked = tmcra::pg::CheckConninfo(setting);
    REQUIRE_FALSE(checked);
    CHECK(checked.error().code == Errc::kInvalidArgument);
    CHECK(checked.error().message.find("PGPASSWORD") != std::string::npos);
    CHECK(checked.error().message.find("hunter2") == std::string::npos);
  }
  auto malformed = tmcra::pg::CheckConninfo("postgresql://tmcra:hunter2@[::1");
  CHECK_FALSE(tmcra::pg::CheckConninfo("postgresql://[::1"));
  REQUIRE_FALSE(malformed);
  CHECK(malformed.error().message.find("hunter2") == std::string::npos);
  CHECK_FALSE(tmcra::pg::CheckConninfo(""));
  CHECK(tmcra::pg::CheckConninfo("postgresql://tmcra@127.0.0.1:5433/memory?sslmode=verify-full"));
  CHECK(tmcra::pg::DescribeConninfo("postgresql://tmcra@db.example:5433/memory") ==
        "db.example:5433/memory");
}

TEST_CASE("pg: a wrong password is a permission error on one line, without the password") {
  const PgCluster cluster = PgCluster::FromEnv();
  auto options = cluster.Options("postgres");
  options.password = "wrong-password-xyzzy";
  auto conn = Connection::Open(options);
  REQUIRE_FALSE(conn);
  CHECK(conn.error().code == Errc::kPermissionDenied);
  CHECK_FALSE(conn.error().retryable);
  CHECK(conn.error().message.find('\n') == std::string::npos);
  CHECK(conn.error().message.find("xyzzy") == std::string::npos);
  CHECK(conn.error().message.find("password authentication failed") != std::string::npos);
}

TEST_CASE("pg: a server that is not there is unavailable and retryable") {
  tmcra::pg::ConnectOptions options;
  options.conninfo = "host=127.0.0.1 port=1 user=tmcra dbname=postgres";
  options.connect_timeout_seconds = 2;
  auto conn = Connection::Open(options);
  REQUIRE_FALSE(conn);
  CHECK(conn.error().code == Errc::kUnavailable);
  CHECK(conn.error().retryable);
  CHECK(conn.error().message.find('\n') == std::string::npos);
}

TEST_CASE("pg: a unique violation is a conflict, a syntax error internal, neither retryable") {
  ScratchDatabase db("errors");
  auto conn = Connection::Open(db.Options());
  REQUIRE(conn);
  REQUIRE((*conn)->Run("CREATE TABLE t(id INT PRIMARY KEY)"));
  REQUIRE((*conn)->Exec("INSERT INTO t VALUES($1)", {Param(1)}));
  auto again = (*conn)->Exec("INSERT INTO t VALUES($1)", {Param(1)});
  REQUIRE_FALSE(again);
  CHECK(again.error().code == Errc::kConflict);
  CHECK_FALSE(again.error().retryable);
  CHECK(again.error().message.find("23505") != std::string::npos);
  auto bad = (*conn)->Run("SELEC 1");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::kInternal);
  // The connection is still good after statement errors.
  CHECK((*conn)->Exec("SELECT 1"));
}

TEST_CASE("pg: a connection the server ended fails its statement retryably, then reconnects") {
  ScratchDatabase db("reconnect");
  auto conn = Connection::Open(db.Options());
  auto killer = Connection::Open(db.Options());
  REQUIRE(conn);
  REQUIRE(killer);
  auto pid = (*conn)->Exec("SELECT pg_backend_pid()");
  REQUIRE(pid);
  REQUIRE((*killer)->Exec("SELECT pg_terminate_backend($1)", {Param(pid->Int(0, 0))}));
  auto lost = (*conn)->Exec("SELECT 1");
  REQUIRE_FALSE(lost);
  CHECK(lost.error().code == Errc::kUnavailable);
  CHECK(lost.error().retryable);
  auto back = (*conn)->Exec("SELECT 2");
  REQUIRE(back);
  CHECK(back->Int(0, 0) == 2);
}

TEST_CASE("pg: a transaction rolls back unless committed") {
  ScratchDatabase db("tx");
  auto conn = Connection::Open(db.Options());
  REQUIRE(conn);
  REQUIRE((*conn)->Run("CREATE TABLE t(id INT)"));
  {
    auto tx = tmcra::pg::Transaction::Begin(**conn);
    REQUIRE(tx);
    REQUIRE((*conn)->Exec("INSERT INTO t VALUES(1)"));
  }
  {
    auto tx = tmcra::pg::Transaction::Begin(**conn);
    REQUIRE(tx);
    REQUIRE((*conn)->Exec("INSERT INTO t VALUES(2)"));
    REQUIRE(tx->Commit());
  }
  auto rows = (*conn)->Exec("SELECT id FROM t");
  REQUIRE(rows);
  REQUIRE(rows->size() == 1);
  CHECK(rows->Int(0, 0) == 2);
}

TEST_CASE(
    "pg: migrations apply once, from any number of starting processes, and refuse a newer schema") {
  ScratchDatabase db("migrate");
  static constexpr const char* kSteps[] = {
      "CREATE TABLE a(id INT)",
      "CREATE TABLE b(id INT); INSERT INTO b VALUES(7)",
  };
  std::vector<std::thread> starters;
  std::vector<tmcra::Status> outcomes(4);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    starters.emplace_back([&, i] {
      auto conn = Connection::Open(db.Options());
      if (!conn) {
        outcomes[i] = conn.error();
        return;
      }
      outcomes[i] = tmcra::pg::Migrate(**conn, "test", kSteps, "the test store");
    });
  }
  for (auto& t : starters) t.join();
  for (const auto& outcome : outcomes) {
    INFO((outcome ? std::string("ok") : outcome.error().ToString()));
    CHECK(outcome);
  }
  auto conn = Connection::Open(db.Options());
  REQUIRE(conn);
  auto rows = (*conn)->Exec("SELECT count(*) FROM b");
  REQUIRE(rows);
  CHECK(rows->Int(0, 0) == 1);
  REQUIRE((*conn)->Run("UPDATE tmcra_schema SET version = 3 WHERE component = 'test'"));
  auto newer = tmcra::pg::Migrate(**conn, "test", kSteps, "the test store");
  REQUIRE_FALSE(newer);
  CHECK(newer.error().message.find("newer than this build knows") != std::string::npos);
}

TEST_CASE("pg: the pool lends at most its size and reuses given-back connections") {
  ScratchDatabase db("pool");
  ConnectionPool pool(db.Options(), 2);
  auto a = pool.Borrow();
  auto b = pool.Borrow();
  REQUIRE(a);
  REQUIRE(b);
  auto pid_a = (*a)->Exec("SELECT pg_backend_pid()");
  REQUIRE(pid_a);
  const int64_t first = pid_a->Int(0, 0);
  std::atomic<bool> third_lent{false};
  std::thread waiter([&] {
    auto c = pool.Borrow();
    third_lent = static_cast<bool>(c);
    if (c) {
      auto pid = (*c)->Exec("SELECT pg_backend_pid()");
      CHECK((pid && pid->Int(0, 0) == first));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(third_lent.load());
  { auto release = std::move(*a); }
  waiter.join();
  CHECK(third_lent.load());
}

TEST_CASE("pg: a password file must be the user's own and private") {
  tmcra::testing::TempDir dir;
  const std::string path = dir.path() + "/pw";
  { std::ofstream(path) << "s3cret\n"; }
  chmod(path.c_str(), 0644);
  auto open = tmcra::pg::ReadPasswordFile(path);
  REQUIRE_FALSE(open);
  CHECK(open.error().message.find("chmod 600") != std::string::npos);
  chmod(path.c_str(), 0600);
  auto ok = tmcra::pg::ReadPasswordFile(path);
  REQUIRE(ok);
  CHECK(*ok == "s3cret");
  CHECK_FALSE(tmcra::pg::ReadPasswordFile(dir.path() + "/missing"));
}
