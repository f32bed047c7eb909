// Local memory controls (docs/contract.md §4.2): per-session modes, generations, the
// no-backfill rule, sub-agent parents, tasks and continuation, and the recall budget, stored in
// files shared with TMCRA's JS plugins and guarded by their lock protocol.
//
// Storage: one JSON file per control key, `<root>/<key>.json`, where
//   key = sha256_hex(base_url + "\0" + api_key + "\0" + scope)      (ControlKey)
// and root is TMCRA_MEMORY_STATE_DIR, else $PLUGIN_DATA/memory-controls, else
// ~/.config/tmcra/memory-controls (created 0700, as are missing parents). Writes take
// `<root>/<key>.lock` (O_CREAT|O_EXCL, 0600; 60 tries 25 ms apart), re-read the state under the
// lock, write `<key>.<uuid>.tmp` (0600), fsync, rename over `<key>.json`, fsync the directory,
// then unlink the lock. The file is written as Python's json.dumps(ensure_ascii=False) writes
// it (separators ", " and ": ", no trailing newline), members in insertion order: the order
// they had in the file, new ones appended, exactly as Python's dict and JS objects keep them.
//
// Stale locks (unlike TMCRA, whose crashed holder blocks forever): our lock file holds
// {"pid", "host", "createdAt"} and we keep an flock(LOCK_EX) on it while we hold it. A busy
// lock is broken when no live tmcra-mcp holds its flock and either its pid (on this host) no
// longer exists or the file is older than 10 s; an empty lock from TMCRA's JS/Python is stale
// only by age. Breaking renames the lock to a unique name before unlinking it, so of two
// breakers only one proceeds (one that renamed a fresh lock by mistake puts it back). A holder
// checks that the lock is still its own before it renames the state into place and before it
// unlinks the lock, so a broken holder neither overwrites a newer state nor removes a new lock.
//
// Deviation from TMCRA (§9.4 #21): `suppressLegacyCapture`, set by correction_start and
// SuppressTurn, is cleared when BeginTurn records a new turn (the corrected turn stays vetoed
// by its hash) and when a mode switch bumps the generation (every earlier capture is invalid
// anyway). The file format is unchanged.
//
// A "capture" is the Policy taken when a turn began; MayWrite(capture) re-checks it against the
// current state, so any mode switch (which bumps the generation) invalidates earlier captures.
//
// Thread-safe: every method reads or writes the files afresh; concurrent writers (threads or
// processes) serialise on the lock file. No method throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::controls {

using json = nlohmann::json;

inline constexpr int64_t kDefaultBudgetChars = 12000;

// The policy of one session (§4.2.2). As JSON it uses TMCRA's field names:
// {key, sessionId, mode, generation, turnHash, parentTurnHash, parentGeneration, read, write}.
struct Policy {
  std::string key;
  std::string session_id;
  std::string mode = "normal";  // normal | recall_only | off
  int64_t generation = 0;
  std::optional<std::string> turn_hash;  // the session's currentTurnHash
  std::optional<std::string> parent_turn_hash;
  int64_t parent_generation = 0;  // JSON null for a session without ":subagent:"
  bool read = true;
  bool write = true;

  json ToJson() const;
  // Reads a capture stored by ToJson (or by TMCRA's Python client); errors name the field.
  static Result<Policy> FromJson(const json& value);
};

// sha256_hex(base_url without trailing '/' + "\0" + api_key + "\0" + scope).
std::string ControlKey(std::string_view base_url, std::string_view api_key, std::string_view scope);

// True when `prompt` asks to continue the current task (§4.2.4): after Python's str.strip(), it
// fully matches, case-insensitively and with Unicode whitespace,
//   (?:好的?[,，\s]*)?(?:继续|接着[做来]?|往下[做走]?|补齐这些|完成这些|continue|resume|go on|carry
//   on)[。.!！\s]*
bool IsContinuation(std::string_view prompt);

// What tmcra_recall needs from the controls, read together (ControlStore::ForRecall).
struct RecallControls {
  Policy policy;
  json handoff;  // continuation()'s {query, task, candidates}; null when policy.read is false
  int64_t budget_chars = kDefaultBudgetChars;
};

class ControlStore {
 public:
  explicit ControlStore(std::string root);

  // TMCRA_MEMORY_STATE_DIR, else $PLUGIN_DATA/memory-controls, else $HOME/.config/tmcra/
  // memory-controls (with "~" expanded). `env` returns std::nullopt for an unset variable.
  template <class Env>
  static std::string DefaultRoot(const Env& env);

  const std::string& root() const { return root_; }

  // Errors: kInvalidArgument for a blank session id, a malformed key or bad arguments (the
  // message says which, as TMCRA's ValueError texts do); kUnavailable when the lock stays busy;
  // kDataLoss for an unreadable or unsupported state file.
  [[nodiscard]] Result<Policy> GetPolicy(const std::string& key, const std::string& session_id);
  // begin_turn: records sha256(turn_id) as the current turn when writing is allowed; returns the
  // fresh policy.
  [[nodiscard]] Result<Policy> BeginTurn(const std::string& key, const std::string& session_id,
                                         const std::string& turn_id);
  // BeginTurn, and what the turn's recall of `prompt` needs (ForRecall's hand-off and budget)
  // from the state it read or wrote: tmcra_turn_prepare reads the file once fewer times per
  // thing it needs. The policy is the one BeginTurn returns.
  [[nodiscard]] Result<RecallControls> BeginTurnForRecall(const std::string& key,
                                                          const std::string& session_id,
                                                          const std::string& turn_id,
                                                          const std::string& prompt);
  // may_write(capture) of §4.2.2, against the current state.
  [[nodiscard]] Result<bool> MayWrite(const Policy& capture);
  // The write gate of an outbox item or prepared turn: MayWrite of the capture its recall
  // receipt holds under "_local_capture"; true when it holds none (nothing was captured).
  [[nodiscard]] Result<bool> MayWriteCaptured(const json& recall_receipt);
  // suppress_turn: the session's current turn (if any) is never captured; legacy capture of the
  // session is suppressed.
  [[nodiscard]] Status SuppressTurn(const std::string& key, const std::string& session_id);
  // control(): dashboard, mode, budget, task, correction_start (§4.2.3). Returns TMCRA's result
  // object for the action (dashboard without "delivery", which the tool adds).
  [[nodiscard]] Result<json> Control(const std::string& key, const std::string& session_id,
                                     const std::string& action, const json& args);
  // continuation(): {query, task, candidates} (§4.2.4).
  [[nodiscard]] Result<json> Continuation(const std::string& key, const std::string& session_id,
                                          const std::string& prompt);
  // budgetChars of the key (default 12000).
  [[nodiscard]] Result<int64_t> BudgetChars(const std::string& key);
  // GetPolicy, then (when the policy reads) Continuation and BudgetChars, from one read of the
  // state: one snapshot, and one parse of a file that grows with the sessions.
  [[nodiscard]] Result<RecallControls> ForRecall(const std::string& key,
                                                 const std::string& session_id,
                                                 const std::string& prompt);

 private:
  std::string root_;
};

template <class Env>
std::string ControlStore::DefaultRoot(const Env& env) {
  const auto value = [&](const char* name) {
    auto v = env(name);
    return v ? *v : std::string();
  };
  std::string home = value("HOME");
  const auto expand = [&](std::string path) {
    if (path == "~") return home;
    if (path.rfind("~/", 0) == 0) return home + path.substr(1);
    return path;
  };
  if (std::string dir = value("TMCRA_MEMORY_STATE_DIR"); !dir.empty()) return expand(dir);
  if (std::string dir = value("PLUGIN_DATA"); !dir.empty()) return expand(dir) + "/memory-controls";
  return home + "/.config/tmcra/memory-controls";
}

}  // namespace tmcra::controls
