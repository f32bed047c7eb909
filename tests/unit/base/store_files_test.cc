// Database::Open opens a store only in a directory nobody else can change, and only files
// nobody else could have written; files of ours that others could read are made 0600 first,
// so SQLite gives the -wal and -shm it creates the same mode.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "base/private_dirs.h"
#include "base/sqlite_db.h"
#include "tests/support/temp_dir.h"

using tmcra::Errc;
using tmcra::db::Database;
using tmcra::testing::TempDir;

namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// A store with one committed row, closed (SQLite removes its -wal and -shm on the last close).
void MakeStore(const std::string& path) {
  auto db = Database::Open({path});
  REQUIRE(db);
  REQUIRE((*db)->Exec("CREATE TABLE t(v TEXT); INSERT INTO t VALUES('secret')"));
}

void RequireRefused(const tmcra::Result<std::unique_ptr<Database>>& opened,
                    const std::string& names, const std::string& says) {
  REQUIRE_FALSE(opened);
  CHECK(opened.error().code == Errc::kPermissionDenied);
  CHECK_FALSE(opened.error().retryable);
  INFO(opened.error().message);
  CHECK(opened.error().message.find(names) != std::string::npos);
  CHECK(opened.error().message.find(says) != std::string::npos);
}

bool NeedRoot() {
  if (geteuid() == 0) return true;
  SUCCEED("not root: cannot give a file to another user");
  return false;
}

}  // namespace

TEST_CASE("a store directory group or others can write in is refused, sticky or not",
          "[db][permissions]") {
  TempDir tmp;
  const std::string data = tmp.File("data");
  REQUIRE(mkdir(data.c_str(), 0700) == 0);
  for (const mode_t mode : {0777u, 01777u, 0770u, 0702u}) {
    INFO("mode " << tmcra::OctalMode(mode));
    REQUIRE(chmod(data.c_str(), mode) == 0);
    auto opened = Database::Open({data + "/memory.db"});
    RequireRefused(opened, data, tmcra::OctalMode(mode));
    CHECK(opened.error().message.find(data + "/memory.db") != std::string::npos);
    CHECK_FALSE(Exists(data + "/memory.db"));  // nothing is created there
    Database::Options read_only{.path = data + "/memory.db", .read_only = true};
    CHECK_FALSE(Database::Open(read_only));
  }
  REQUIRE(chmod(data.c_str(), 0755) == 0);  // others may look, not write: fine
  CHECK(Database::Open({data + "/memory.db"}));
}

TEST_CASE("a store directory owned by another user is refused", "[db][permissions]") {
  if (!NeedRoot()) return;
  TempDir tmp;
  const std::string data = tmp.File("data");
  REQUIRE(mkdir(data.c_str(), 0700) == 0);
  REQUIRE(chown(data.c_str(), 65534, 65534) == 0);
  RequireRefused(Database::Open({data + "/keys.db"}), data, "uid 65534");
  CHECK_FALSE(Exists(data + "/keys.db"));
}

TEST_CASE("a store file owned by another user is refused, -wal and -shm too", "[db][permissions]") {
  if (!NeedRoot()) return;
  TempDir tmp;
  const std::string path = tmp.File("memory.db");
  MakeStore(path);
  for (const std::string suffix : {"", "-wal", "-shm", "-journal"}) {
    INFO("file memory.db" << suffix);
    const std::string file = path + suffix;
    if (!suffix.empty()) REQUIRE(close(open(file.c_str(), O_CREAT | O_WRONLY, 0600)) == 0);
    REQUIRE(chown(file.c_str(), 65534, 65534) == 0);
    RequireRefused(Database::Open({path}), file, "uid 65534");
    REQUIRE(chown(file.c_str(), geteuid(), getegid()) == 0);
    if (!suffix.empty()) REQUIRE(unlink(file.c_str()) == 0);
  }
  CHECK(Database::Open({path}));
}

TEST_CASE("a store file group or others can write is refused, not repaired", "[db][permissions]") {
  TempDir tmp;
  const std::string path = tmp.File("outbox.sqlite3");
  MakeStore(path);
  for (const mode_t mode : {0666u, 0620u, 0602u}) {
    INFO("mode " << tmcra::OctalMode(mode));
    REQUIRE(chmod(path.c_str(), mode) == 0);
    RequireRefused(Database::Open({path}), path, tmcra::OctalMode(mode));
    CHECK(ModeOf(path) == mode);  // its content may have been changed: the user decides
  }
}

TEST_CASE("a store of ours others can read is made 0600, and SQLite's -wal and -shm with it",
          "[db][permissions]") {
  TempDir tmp;
  const std::string path = tmp.File("memory.db");
  MakeStore(path);
  REQUIRE(chmod(path.c_str(), 0644) == 0);  // e.g. restored from a backup
  auto db = Database::Open({path});
  REQUIRE(db);
  REQUIRE((*db)->Exec("INSERT INTO t VALUES('more')"));
  REQUIRE(Exists(path + "-wal"));
  REQUIRE(Exists(path + "-shm"));
  CHECK(ModeOf(path) == 0600);
  CHECK(ModeOf(path + "-wal") == 0600);
  CHECK(ModeOf(path + "-shm") == 0600);

  // A -wal and -shm left readable by others (an older build, a crash) are made 0600 too.
  REQUIRE(chmod((path + "-wal").c_str(), 0644) == 0);
  REQUIRE(chmod((path + "-shm").c_str(), 0604) == 0);
  auto second = Database::Open({path});
  REQUIRE(second);
  CHECK(ModeOf(path + "-wal") == 0600);
  CHECK(ModeOf(path + "-shm") == 0600);

  // Only group and other bits go: a read-only file of ours stays read-only.
  db->reset();
  second->reset();
  REQUIRE(chmod(path.c_str(), 0444) == 0);
  Database::Options read_only{.path = path, .read_only = true};
  CHECK(Database::Open(read_only));
  CHECK(ModeOf(path) == 0400);
}

TEST_CASE("a new store's -wal and -shm are 0600 whatever the umask", "[db][permissions]") {
  TempDir tmp;
  const std::string path = tmp.File("new.db");
  const mode_t old_umask = umask(0);
  auto db = Database::Open({path});
  umask(old_umask);
  REQUIRE(db);
  REQUIRE((*db)->Exec("CREATE TABLE t(v TEXT); INSERT INTO t VALUES('x')"));
  CHECK(ModeOf(path) == 0600);
  CHECK(ModeOf(path + "-wal") == 0600);
  CHECK(ModeOf(path + "-shm") == 0600);
}

TEST_CASE("a store file is never reached through a symbolic link, and a data directory may be",
          "[db][permissions]") {
  TempDir tmp;
  const std::string real = tmp.File("real.db");
  MakeStore(real);
  const std::string link = tmp.File("memory.db");
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  RequireRefused(Database::Open({link}), link, "symbolic link");

  const std::string store = tmp.File("store.db");
  MakeStore(store);
  REQUIRE(symlink(tmp.File("elsewhere-wal").c_str(), (store + "-wal").c_str()) == 0);
  RequireRefused(Database::Open({store}), store + "-wal", "symbolic link");
  CHECK_FALSE(Exists(tmp.File("elsewhere-wal")));

  // The directory reached through a link is the one checked.
  const std::string target = tmp.File("target");
  REQUIRE(mkdir(target.c_str(), 0700) == 0);
  const std::string data = tmp.File("data");
  REQUIRE(symlink(target.c_str(), data.c_str()) == 0);
  CHECK(Database::Open({data + "/memory.db"}));
  REQUIRE(chmod(target.c_str(), 0777) == 0);
  RequireRefused(Database::Open({data + "/memory.db"}), data, "0777");
}
