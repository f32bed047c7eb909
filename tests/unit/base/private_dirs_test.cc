// The one rule for directories holding files of ours: owned by this user or root, not writable
// by group or others (a sticky one only where the caller accepts it).
#include "base/private_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

using tmcra::CheckDirClosedToOthers;
using tmcra::Errc;
using tmcra::MakePrivateDirs;
using tmcra::StickyDirs;
using tmcra::testing::TempDir;

TEST_CASE("a 0700 or 0755 directory of ours is closed to others", "[common][permissions]") {
  TempDir dir;
  const std::string data = dir.File("data");
  REQUIRE(MakePrivateDirs(data));
  for (const mode_t mode : {0700u, 0750u, 0755u, 0555u}) {
    REQUIRE(chmod(data.c_str(), mode) == 0);
    CHECK(CheckDirClosedToOthers(data, StickyDirs::kRefused));
    CHECK(CheckDirClosedToOthers(data, StickyDirs::kAccepted));
  }
}

TEST_CASE("a directory group or others can write in is refused, naming the fix",
          "[common][permissions]") {
  TempDir dir;
  const std::string data = dir.File("data");
  REQUIRE(MakePrivateDirs(data));
  for (const mode_t mode : {0777u, 0770u, 0707u, 0720u, 0702u}) {
    INFO("mode " << tmcra::OctalMode(mode));
    REQUIRE(chmod(data.c_str(), mode) == 0);
    auto refused = CheckDirClosedToOthers(data, StickyDirs::kRefused);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == Errc::kPermissionDenied);
    CHECK_FALSE(refused.error().retryable);
    CHECK(refused.error().message.find(data) != std::string::npos);
    CHECK(refused.error().message.find(tmcra::OctalMode(mode)) != std::string::npos);
    CHECK(refused.error().message.find("chmod go-w " + data) != std::string::npos);
    CHECK_FALSE(CheckDirClosedToOthers(data, StickyDirs::kAccepted));
  }
}

TEST_CASE("a sticky world-writable directory is refused where files are created",
          "[common][permissions]") {
  TempDir dir;
  const std::string shared = dir.File("shared");
  REQUIRE(MakePrivateDirs(shared));
  REQUIRE(chmod(shared.c_str(), 01777) == 0);  // like /tmp
  CHECK(CheckDirClosedToOthers(shared, StickyDirs::kAccepted));
  auto refused = CheckDirClosedToOthers(shared, StickyDirs::kRefused);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("1777") != std::string::npos);
  CHECK(refused.error().message.find("sticky") != std::string::npos);
  // No advice to chmod a shared directory such as /tmp.
  CHECK(refused.error().message.find("chmod") == std::string::npos);
  CHECK(refused.error().message.find("mkdir -m 700") != std::string::npos);
}

TEST_CASE("a directory owned by another user is refused, and root's is not",
          "[common][permissions]") {
  if (geteuid() != 0) {
    SUCCEED("not root: cannot make a directory owned by someone else");
    return;
  }
  TempDir dir;
  const std::string theirs = dir.File("theirs");
  REQUIRE(MakePrivateDirs(theirs));
  REQUIRE(chown(theirs.c_str(), 65534, 65534) == 0);
  for (const StickyDirs sticky : {StickyDirs::kRefused, StickyDirs::kAccepted}) {
    auto refused = CheckDirClosedToOthers(theirs, sticky);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find(theirs) != std::string::npos);
    CHECK(refused.error().message.find("uid 65534") != std::string::npos);
  }
  CHECK(CheckDirClosedToOthers("/", StickyDirs::kRefused));  // root's, 0755
}

TEST_CASE("a symbolic link to a directory is followed and its target checked",
          "[common][permissions]") {
  TempDir dir;
  const std::string target = dir.File("target");
  const std::string link = dir.File("link");
  REQUIRE(MakePrivateDirs(target));
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  CHECK(CheckDirClosedToOthers(link, StickyDirs::kRefused));
  REQUIRE(chmod(target.c_str(), 0777) == 0);
  CHECK_FALSE(CheckDirClosedToOthers(link, StickyDirs::kRefused));
  auto missing = CheckDirClosedToOthers(dir.File("missing"), StickyDirs::kRefused);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find(dir.File("missing")) != std::string::npos);
}
