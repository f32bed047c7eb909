#include "base/sqlite_db.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

using tmcra::Errc;
using tmcra::db::Database;
using tmcra::db::Transaction;

TEST_CASE("a database file is created 0600 in 0700 directories, in WAL mode", "[db]") {
  tmcra::testing::TempDir dir;
  auto db = Database::Open({dir.File("a/b/c.db")});
  REQUIRE(db);
  struct stat st {};
  REQUIRE(stat(dir.File("a").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(dir.File("a/b/c.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto mode = (*db)->Prepare("PRAGMA journal_mode");
  REQUIRE(mode);
  REQUIRE(*mode->Step());
  CHECK(mode->Text(0) == "wal");
  auto sync = (*db)->Prepare("PRAGMA synchronous");
  REQUIRE(*sync->Step());
  CHECK(sync->Int(0) == 2);  // FULL
}

TEST_CASE("a connection opened with mmap_bytes reads through a map of that size", "[db]") {
  tmcra::testing::TempDir dir;
  for (const int64_t bytes : {int64_t{0}, int64_t{1} << 30}) {
    Database::Options options;
    options.path = dir.File("m.db");
    options.mmap_bytes = bytes;
    auto db = Database::Open(options);
    REQUIRE(db);
    auto size = (*db)->Prepare("PRAGMA mmap_size");
    REQUIRE(size);
    REQUIRE(*size->Step());
    CHECK(size->Int(0) == bytes);  // 0: SQLite's default, no map
  }
}

TEST_CASE("errors are classified once: constraint, busy, syntax", "[db]") {
  tmcra::testing::TempDir dir;
  auto a = Database::Open({dir.File("x.db"), /*busy_timeout_ms=*/50});
  auto b = Database::Open({dir.File("x.db"), /*busy_timeout_ms=*/50});
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE((*a)->Exec("CREATE TABLE t(k TEXT PRIMARY KEY)"));
  REQUIRE((*a)->Exec("INSERT INTO t VALUES('x')"));
  auto dup = (*a)->Exec("INSERT INTO t VALUES('x')");
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Errc::kConflict);
  auto tx = Transaction::Immediate(**a);
  REQUIRE(tx);
  auto busy = Transaction::Immediate(**b);
  REQUIRE_FALSE(busy);
  CHECK(busy.error().code == Errc::kUnavailable);
  CHECK(busy.error().retryable);
  auto bad = (*a)->Prepare("SELEC nonsense");
  REQUIRE_FALSE(bad);
  CHECK_FALSE(bad.error().retryable);
}

TEST_CASE("a transaction rolls back unless committed", "[db]") {
  tmcra::testing::TempDir dir;
  auto db = Database::Open({dir.File("x.db")});
  REQUIRE(db);
  REQUIRE((*db)->Exec("CREATE TABLE t(v INTEGER)"));
  {
    auto tx = Transaction::Immediate(**db);
    REQUIRE(tx);
    REQUIRE((*db)->Exec("INSERT INTO t VALUES(1)"));
  }
  {
    auto tx = Transaction::Immediate(**db);
    REQUIRE((*db)->Exec("INSERT INTO t VALUES(2)"));
    REQUIRE(tx->Commit());
  }
  auto st = (*db)->Prepare("SELECT group_concat(v) FROM t");
  REQUIRE(*st->Step());
  CHECK(st->Text(0) == "2");
}

TEST_CASE("processes creating the same new database at once all open it", "[db][regress]") {
  // Regression: switching a brand-new file to WAL could fail with "database is locked" at once
  // when several processes created it together (hosts start one server per session).
  for (int trial = 0; trial < 40; ++trial) {
    tmcra::testing::TempDir dir;
    const std::string path = dir.File("fresh.db");
    std::vector<pid_t> children;
    int gate[2];
    REQUIRE(pipe(gate) == 0);
    for (int i = 0; i < 8; ++i) {
      const pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        close(gate[1]);
        char go = 0;
        (void)!read(gate[0], &go, 1);  // all children start together when the gate closes
        auto db = Database::Open({path});
        _exit(db && (*db)->Exec("CREATE TABLE IF NOT EXISTS t(x)") ? 0 : 1);
      }
      children.push_back(pid);
    }
    close(gate[0]);
    close(gate[1]);
    int failures = 0;
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
    INFO("trial " << trial);
    CHECK(failures == 0);
  }
}

TEST_CASE("opening a file twice in one process keeps the first connection's locks", "[db]") {
  // POSIX releases every lock a process holds on a file when any descriptor of that file is
  // closed. If Open opened and closed an existing database file, the first connection's locks
  // would be gone; another process closing its own connection would then believe itself the
  // last one, check-point and delete the WAL under us, and later commits would be lost.
  tmcra::testing::TempDir dir;
  const std::string path = dir.File("memory.db");
  auto first = Database::Open({path});
  REQUIRE(first);
  REQUIRE(
      (*first)->Exec("CREATE TABLE records(message_id TEXT); "
                     "INSERT INTO records VALUES('m1')"));
  auto second = Database::Open({path});  // a second connection of this process
  REQUIRE(second);
  // Another process opens the same file and closes it.
  tmcra::testing::Subprocess other({TMCRA_STORE_CHECK_BIN, dir.path()});
  other.ReadAll();
  auto status = other.Wait(std::chrono::seconds(30));
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  struct stat st {};
  CHECK(stat((path + "-wal").c_str(), &st) == 0);  // still ours
  REQUIRE((*first)->Exec("INSERT INTO records VALUES('m2')"));
  second->reset();
  first->reset();
  auto fresh = Database::Open({path});
  REQUIRE(fresh);
  auto count = (*fresh)->Prepare("SELECT COUNT(*) FROM records");
  REQUIRE(count);
  REQUIRE(*count->Step());
  CHECK(count->Int(0) == 2);
  auto check = (*fresh)->Prepare("PRAGMA integrity_check");
  REQUIRE(*check->Step());
  CHECK(check->Text(0) == "ok");
}

TEST_CASE("prepared statements are reused clean, and may outlive their database", "[db]") {
  tmcra::testing::TempDir dir;
  auto db = Database::Open({dir.File("s.db")});
  REQUIRE(db);
  REQUIRE((*db)->Exec("CREATE TABLE t(a INTEGER, b TEXT)"));
  for (int i = 0; i < 3; ++i) {
    auto insert = (*db)->Prepare("INSERT INTO t(a, b) VALUES(?, ?)");
    REQUIRE(insert);
    insert->Bind(1, i);
    if (i == 0) insert->Bind(2, "first");  // later uses must not see this binding
    REQUIRE(insert->Run());
  }
  {
    // Left mid-way (a row ready): back in the cache it must hold no read transaction.
    auto open_read = (*db)->Prepare("SELECT a FROM t ORDER BY a");
    REQUIRE(*open_read->Step());
  }
  auto other = Database::Open({dir.File("s.db")});
  REQUIRE(other);
  REQUIRE((*other)->Exec("INSERT INTO t(a, b) VALUES(9, 'x')"));  // a writer is not blocked
  REQUIRE((*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  auto nulls = (*db)->Prepare("SELECT COUNT(*) FROM t WHERE b IS NULL");
  REQUIRE(*nulls->Step());
  CHECK(nulls->Int(0) == 2);
  // Many distinct texts: the cache stays bounded and every statement still works.
  for (int i = 0; i < 200; ++i) {
    auto st = (*db)->Prepare("SELECT " + std::to_string(i));
    REQUIRE(st);
    REQUIRE(*st->Step());
    CHECK(st->Int(0) == i);
  }
  auto survivor = (*db)->Prepare("SELECT a FROM t");
  REQUIRE(survivor);
  db->reset();  // the statement outlives its Database: finalized later, no use after free
  survivor->Reset();
}
