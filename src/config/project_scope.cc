#include "src/config/project_scope.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "base/sha256.h"

namespace tmcra::config {

namespace {

std::optional<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return std::string(buffer);
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Join(const std::string& dir, const std::string& relative) {
  if (!relative.empty() && relative[0] == '/') return relative;
  return dir == "/" ? "/" + relative : dir + "/" + relative;
}

// A small regular file's text (at most 64 KiB; opened without blocking, so a FIFO in its place
// cannot stall the caller), or nullopt.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= 65536) {
    std::string text(static_cast<size_t>(st.st_size), '\0');
    const ssize_t n = read(fd, text.data(), text.size());
    if (n >= 0) {
      text.resize(static_cast<size_t>(n));
      out = std::move(text);
    }
  }
  close(fd);
  return out;
}

// The first line of a small file, without its line end.
std::optional<std::string> FirstLine(const std::string& path) {
  auto text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  std::string line = text->substr(0, text->find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// The git directory a `.git` entry of `dir` names: the directory itself, or the target of a
// `gitdir: PATH` file (a linked worktree or a submodule).
std::optional<std::string> GitDirOf(const std::string& dir) {
  const std::string dot_git = Join(dir, ".git");
  struct stat st {};
  if (stat(dot_git.c_str(), &st) != 0) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return dot_git;
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  auto line = FirstLine(dot_git);
  constexpr std::string_view kPrefix = "gitdir: ";
  if (!line || line->rfind(kPrefix, 0) != 0) return std::nullopt;
  return RealPath(Join(dir, line->substr(kPrefix.size())));
}

// The repository's common directory: a linked worktree's git directory names it in `commondir`.
std::string CommonDirOf(const std::string& git_dir) {
  auto common = FirstLine(Join(git_dir, "commondir"));
  if (!common || common->empty()) return git_dir;
  return RealPath(Join(git_dir, *common)).value_or(git_dir);
}

// `url` of [remote "origin"] in the repository's config, or empty.
std::string OriginUrl(const std::string& common_dir) {
  auto config = ReadSmallFile(Join(common_dir, "config"));
  if (!config) return "";
  std::istringstream in(*config);
  std::string line;
  bool in_origin = false;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    std::string_view text = std::string_view(line).substr(start);
    if (text.front() == '[') {
      in_origin = text.rfind("[remote \"origin\"]", 0) == 0;
      continue;
    }
    if (!in_origin || text.rfind("url", 0) != 0) continue;
    const size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view value = text.substr(eq + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return std::string(value);
  }
  return "";
}

// One spelling per repository: "git@host:owner/repo.git", "ssh://git@host/owner/repo" and
// "https://host/owner/repo/" all become "host/owner/repo" (lower-case host).
std::string NormalizedOrigin(std::string url) {
  if (const size_t scheme = url.find("://"); scheme != std::string::npos) {
    url.erase(0, scheme + 3);
  } else if (const size_t colon = url.find(':');
             colon != std::string::npos && url.find('/') > colon) {
    url[colon] = '/';  // scp-like syntax
  }
  if (const size_t at = url.find('@'); at != std::string::npos && at < url.find('/')) {
    url.erase(0, at + 1);
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() > 4 && url.compare(url.size() - 4, 4, ".git") == 0) url.resize(url.size() - 4);
  const size_t host_end = std::min(url.find('/'), url.size());
  for (size_t i = 0; i < host_end; ++i) {
    if (url[i] >= 'A' && url[i] <= 'Z') url[i] = static_cast<char>(url[i] - 'A' + 'a');
  }
  return url;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

std::string ProjectScopeName(std::string_view root, std::string_view identity) {
  std::string name;
  const size_t slash = root.find_last_of('/');
  for (char c : root.substr(slash == std::string_view::npos ? 0 : slash + 1)) {
    if (name.size() >= 48) break;
    name.push_back(IsNameChar(c) ? c : '_');
  }
  // A scope name starts with a letter or digit.
  while (!name.empty() &&
         !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
           (name[0] >= '0' && name[0] <= '9'))) {
    name.erase(0, 1);
  }
  if (name.empty()) name = "project";
  return name + "-" + Sha256Hex(identity).substr(0, 10);
}

std::optional<Project> FindProject(const std::string& cwd, const std::string& home) {
  auto start = RealPath(cwd);
  if (!start) return std::nullopt;
  const std::string home_real = RealPath(home).value_or(home);
  for (std::string dir = *start;; dir = Parent(dir)) {
    // The first `.git` entry up the tree decides, even one that cannot be read (a broken
    // worktree is not a reason to join an enclosing repository). A repository at the home
    // directory (dotfiles) is no project.
    struct stat st {};
    if (dir != home_real && lstat(Join(dir, ".git").c_str(), &st) == 0) {
      auto git_dir = GitDirOf(dir);
      if (!git_dir) return Project{dir, ProjectScopeName(dir, dir), false};
      const std::string common = CommonDirOf(*git_dir);
      // The main working tree holds the common directory as its `.git`; a bare repository's
      // worktrees are named after the repository itself.
      const std::string root = Basename(common) == ".git" ? Parent(common) : common;
      const std::string origin = OriginUrl(common);
      return Project{root, ProjectScopeName(root, origin.empty() ? root : NormalizedOrigin(origin)),
                     true};
    }
    if (dir == "/") break;
  }
  if (*start == "/" || *start == home_real) return std::nullopt;
  return Project{*start, ProjectScopeName(*start, *start), false};
}

}  // namespace tmcra::config
