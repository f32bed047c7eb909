// The project a working directory belongs to, and the memory scope named after it (docs/hooks.md
// "Scopes"). The host hooks store a turn in its project's scope, and the MCP server a host starts
// in that project (with hooks) uses the same scope, so both always agree.
//
// The project is the git repository holding the directory: its subdirectories and its linked
// worktrees (`git worktree add`) all map to the main working tree. Outside a repository it is the
// directory itself, except the home directory and "/", which are no project (memory then stays
// personal). Nothing is run: the `.git` file or directory, `commondir` and the repository's
// `config` are read directly, so it costs a few stat and read calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tmcra::config {

struct Project {
  std::string root;   // the main working tree (or the directory), as given by realpath
  std::string scope;  // "<name>-<10 hex>", a valid scope name (identifiers.h)
  bool git = false;   // root is a git repository's main working tree
};

// The scope name: the root's last path component reduced to [A-Za-z0-9_.-] (at most 48
// characters, "project" when nothing is left), a dash, and the first 10 hex digits of the
// sha256 of the repository's origin URL, else of the root path. Two clones of one repository
// share their memory; two unrelated directories of one name do not.
std::string ProjectScopeName(std::string_view root, std::string_view identity);

// The project of `cwd` (absolute). nullopt: no project (no such directory, the home directory,
// or "/").
std::optional<Project> FindProject(const std::string& cwd, const std::string& home);

}  // namespace tmcra::config
