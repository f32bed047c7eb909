// The project scope rule on real directories: a repository's subdirectories and linked
// worktrees share one scope, named after the repository and its origin.
#include "src/config/project_scope.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/identifiers.h"
#include "tests/support/temp_dir.h"

using tmcra::config::FindProject;
using tmcra::testing::TempDir;

namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("subdirectories and linked worktrees of a repository share its scope",
          "[config][scope]") {
  TempDir dir;
  const std::string repo = dir.File("My Repo");
  mkdir(repo.c_str(), 0700);
  mkdir((repo + "/.git").c_str(), 0700);
  mkdir((repo + "/.git/worktrees").c_str(), 0700);
  mkdir((repo + "/.git/worktrees/wt").c_str(), 0700);
  mkdir((repo + "/src").c_str(), 0700);
  mkdir((repo + "/src/deep").c_str(), 0700);
  Write(repo + "/.git/config",
        "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@example.com:acme/widgets.git\n");
  const std::string wt = dir.File("wt");
  mkdir(wt.c_str(), 0700);
  Write(wt + "/.git", "gitdir: " + repo + "/.git/worktrees/wt\n");
  Write(repo + "/.git/worktrees/wt/commondir", "../..\n");

  auto top = FindProject(repo, "/nonexistent-home");
  auto deep = FindProject(repo + "/src/deep", "/nonexistent-home");
  auto linked = FindProject(wt, "/nonexistent-home");
  REQUIRE(top);
  REQUIRE(deep);
  REQUIRE(linked);
  CHECK(top->git);
  CHECK(top->scope.rfind("My_Repo-", 0) == 0);
  CHECK(top->scope.size() == std::string("My_Repo-").size() + 10);
  CHECK(tmcra::IsValidScope(top->scope));
  CHECK(deep->scope == top->scope);
  CHECK(linked->scope == top->scope);
  // Named after the origin: another clone of it shares the scope.
  // Named after the origin, however it is spelled: another clone of it shares the scope.
  CHECK(top->scope == tmcra::config::ProjectScopeName(repo, "example.com/acme/widgets"));
  Write(repo + "/.git/config", "[remote \"origin\"]\n\turl = https://Example.com/acme/widgets/\n");
  CHECK(FindProject(repo, "/nonexistent-home")->scope == top->scope);
  // A FIFO where a file should be does not stall the search.
  unlink((repo + "/.git/worktrees/wt/commondir").c_str());
  mkfifo((repo + "/.git/worktrees/wt/commondir").c_str(), 0600);
  CHECK(FindProject(wt, "/nonexistent-home"));
}

TEST_CASE("outside a repository the directory is the project, but home and / are none",
          "[config][scope]") {
  TempDir dir;
  const std::string plain = dir.File("notes");
  mkdir(plain.c_str(), 0700);
  auto project = FindProject(plain, dir.path());
  REQUIRE(project);
  CHECK_FALSE(project->git);
  CHECK(project->scope.rfind("notes-", 0) == 0);
  CHECK_FALSE(FindProject(dir.path(), dir.path()));
  CHECK_FALSE(FindProject("/", dir.path()));
  CHECK_FALSE(FindProject(dir.File("missing"), dir.path()));
  CHECK(tmcra::config::ProjectScopeName("/x/..-", "id").rfind("project-", 0) == 0);
}

TEST_CASE("a home directory that is a repository is no project", "[config][scope]") {
  TempDir dir;
  mkdir(dir.File(".git").c_str(), 0700);
  const std::string notes = dir.File("notes");
  mkdir(notes.c_str(), 0700);
  CHECK_FALSE(FindProject(dir.path(), dir.path()));
  auto project = FindProject(notes, dir.path());
  REQUIRE(project);
  CHECK_FALSE(project->git);
  CHECK(project->scope.rfind("notes-", 0) == 0);
}
