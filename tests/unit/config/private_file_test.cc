// Reading credential files (docs/reliability.md §4.3, test row S2): only a regular file
// owned by this uid, not reachable through a symbolic link, without group/other access, in a
// directory nobody else can write.
#include "src/config/private_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "tests/unit/config/config_test_util.h"

using tmcra::config::FileSecrecy;
using tmcra::config::ReadPrivateFile;
using tmcra::testing::TempDir;
using tmcra::testing::WriteFile;

namespace {

const std::string kSecret = "tmcra_CANARY.9f8e7d6c5b4a";

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

}  // namespace

TEST_CASE("a 0600 file of ours is read and a missing one is absent", "[config][permissions]") {
  TempDir dir;
  const std::string path = dir.File("config.json");
  auto missing = ReadPrivateFile(path, FileSecrecy::kSecret);
  REQUIRE(missing);
  CHECK_FALSE(*missing);
  auto missing_dir = ReadPrivateFile(dir.File("nope/config.json"), FileSecrecy::kSecret);
  REQUIRE(missing_dir);
  CHECK_FALSE(*missing_dir);

  WriteFile(path, "{\"apiKey\":\"" + kSecret + "\"}", 0600);
  auto read = ReadPrivateFile(path, FileSecrecy::kSecret);
  REQUIRE(read);
  REQUIRE(*read);
  CHECK(**read == "{\"apiKey\":\"" + kSecret + "\"}");
}

TEST_CASE("secret files with group or other bits are refused", "[config][permissions]") {
  TempDir dir;
  const std::string path = dir.File("config.json");
  for (const mode_t mode : {0640u, 0644u, 0666u, 0660u, 0604u, 0610u, 0601u, 0740u}) {
    INFO("mode " << Octal(mode));
    WriteFile(path, kSecret, mode);
    auto r = ReadPrivateFile(path, FileSecrecy::kSecret);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == tmcra::Errc::kInvalidArgument);
    CHECK(r.error().message.find(path) != std::string::npos);
    CHECK(r.error().message.find(Octal(mode)) != std::string::npos);
    CHECK(r.error().message.find("CANARY") == std::string::npos);
  }
  for (const mode_t mode : {0600u, 0400u, 0700u}) {
    WriteFile(path, kSecret, 0600);
    chmod(path.c_str(), mode);
    CHECK(ReadPrivateFile(path, FileSecrecy::kSecret));
  }
}

TEST_CASE("integrity files may be readable by others, never writable", "[config][permissions]") {
  TempDir dir;
  const std::string path = dir.File("local-memory.json");
  for (const mode_t mode : {0600u, 0640u, 0644u, 0444u}) {
    WriteFile(path, "{}", 0600);
    chmod(path.c_str(), mode);
    CHECK(ReadPrivateFile(path, FileSecrecy::kIntegrity));
  }
  for (const mode_t mode : {0660u, 0666u, 0602u, 0622u}) {
    WriteFile(path, "{}", mode);
    auto r = ReadPrivateFile(path, FileSecrecy::kIntegrity);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find(Octal(mode)) != std::string::npos);
  }
}

TEST_CASE("a symbolic link is refused, even to a good file", "[config][permissions]") {
  TempDir dir;
  const std::string target = dir.File("real.json");
  const std::string link = dir.File("config.json");
  WriteFile(target, kSecret, 0600);
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  auto r = ReadPrivateFile(link, FileSecrecy::kSecret);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(link) != std::string::npos);
  CHECK(r.error().message.find("symbolic link") != std::string::npos);
  CHECK(r.error().message.find("CANARY") == std::string::npos);

  // A dangling link is refused as well, not read as a missing file.
  const std::string dangling = dir.File("dangling.json");
  REQUIRE(symlink(dir.File("nowhere").c_str(), dangling.c_str()) == 0);
  CHECK_FALSE(ReadPrivateFile(dangling, FileSecrecy::kSecret));
}

TEST_CASE("files and directories owned by others, and open directories", "[config][permissions]") {
  TempDir dir;
  SECTION("a directory writable by others") {
    const std::string open_dir = dir.File("open");
    tmcra::testing::MakeDirs(open_dir);
    const std::string path = open_dir + "/config.json";
    WriteFile(path, kSecret, 0600);
    chmod(open_dir.c_str(), 0777);
    auto r = ReadPrivateFile(path, FileSecrecy::kSecret);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find(open_dir) != std::string::npos);
    CHECK(r.error().message.find("0777") != std::string::npos);
    chmod(open_dir.c_str(), 01777);  // sticky, like /tmp: others cannot replace our file
    CHECK(ReadPrivateFile(path, FileSecrecy::kSecret));
  }
  SECTION("not a regular file") {
    auto r = ReadPrivateFile(dir.path(), FileSecrecy::kSecret);
    REQUIRE_FALSE(r);
  }
  SECTION("owned by another uid (needs root to set up)") {
    if (geteuid() != 0) {
      SUCCEED("not root: cannot create a file owned by someone else");
      return;
    }
    const std::string path = dir.File("config.json");
    WriteFile(path, kSecret, 0600);
    REQUIRE(chown(path.c_str(), 4242, 4242) == 0);
    auto r = ReadPrivateFile(path, FileSecrecy::kSecret);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("uid 4242") != std::string::npos);
    CHECK(r.error().message.find(path) != std::string::npos);

    // A symbolic link to a file owned by another user.
    const std::string link = dir.File("link.json");
    REQUIRE(symlink(path.c_str(), link.c_str()) == 0);
    CHECK_FALSE(ReadPrivateFile(link, FileSecrecy::kSecret));

    // The directory owned by another (non-root) user.
    const std::string theirs = dir.File("theirs");
    tmcra::testing::MakeDirs(theirs);
    WriteFile(theirs + "/config.json", kSecret, 0600);
    REQUIRE(chown(theirs.c_str(), 4242, 4242) == 0);
    auto d = ReadPrivateFile(theirs + "/config.json", FileSecrecy::kSecret);
    REQUIRE_FALSE(d);
    CHECK(d.error().message.find("directory") != std::string::npos);
  }
}

TEST_CASE("oversized files are refused", "[config][permissions]") {
  TempDir dir;
  const std::string path = dir.File("big.json");
  WriteFile(path, std::string((1 << 20) + 1, ' '), 0600);
  auto r = ReadPrivateFile(path, FileSecrecy::kSecret);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("1 MiB") != std::string::npos);
}
