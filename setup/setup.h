// tmcra-mcp-setup's three operations on one host: install (register tmcra-mcp), remove, and
// inspect (for `status`). Each returns a report the main prints; none throws.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "setup/config_edit.h"
#include "setup/hosts.h"

namespace tmcra::setup {

// The entry for `target`: our name and command, "type": "stdio" where the host writes it, and
// for Codex the environment variables to pass on (Codex gives a server only HOME, PATH and a
// few more) and a tool timeout of 180 s (tmcra_wait_job waits 120 s by default, and
// tmcra_feedback up to 120 s for the user's answer; Codex's default is 60 s).
ServerEntry EntryFor(const HostTarget& target, std::string name, std::string command);

struct HostReport {
  bool ok = false;
  bool changed = false;     // the file was (dry run: would be) changed
  std::string message;      // one line: what was done, or why not
  std::string backup_path;  // the copy of the file as it was, when it was changed
  std::string snippet;      // when the file could not be edited: the entry to add by hand
};

// Registers `entry` in the target's config file (creating it and its directories, 0600/0700,
// when missing). `dry_run` reads and checks everything but writes nothing.
HostReport Install(const HostTarget& target, const ServerEntry& entry, bool dry_run,
                   std::chrono::system_clock::time_point now);

// Removes the server `name` from the target's config file, backing it up first.
HostReport Remove(const HostTarget& target, std::string_view name, bool dry_run,
                  std::chrono::system_clock::time_point now);

struct HostStatus {
  std::string state;  // "registered", "not registered", "no config file", "unreadable"
  std::optional<std::string> command;  // the registered command
  bool command_is_ours = false;        // it is `our_command`
  bool command_runs = false;           // it is an executable file
  std::string detail;                  // why unreadable
};

HostStatus Inspect(const HostTarget& target, std::string_view name, std::string_view our_command);

// A regular file this user may execute (a registered command, or the one to register).
bool IsExecutableFile(const std::string& path);

}  // namespace tmcra::setup
