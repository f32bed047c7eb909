// The work of one host hook event (docs/hooks.md): the turn lifecycle of tmcra_turn_prepare
// and tmcra_turn_commit run on the host's own turns, without the model's help.
//
// Promises:
// - A turn is bound (prepared) on UserPromptSubmit and committed once on Stop, through the
//   outbox: a commit that cannot be delivered before the deadline stays queued and is
//   delivered by a later hook or by the MCP server; every write has a key derived from the
//   turn, so a repeated event or a PreCompact of stored turns writes nothing new.
// - What reaches the model is the recalled memory inside an untrusted envelope, within a byte
//   cap, without the memory this host session was already given or its own turns.
// - The output is what the host takes on stdout for the event, or empty; an error is returned,
//   never thrown, and the caller prints nothing for it (fail-open; for Gemini CLI, which shows
//   a hook's stderr when its stdout is empty, the caller prints `{}` instead of nothing).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "queue/delivery.h"
#include "src/hooks/hook_event.h"
#include "src/tools/memory_tools.h"

namespace tmcra::hooks {

struct HookOptions {
  size_t context_bytes = 4096;   // cap of the injected envelope (TMCRA_HOOK_CONTEXT_BYTES)
  size_t min_prompt_chars = 12;  // shorter prompts recall nothing (TMCRA_HOOK_MIN_PROMPT_CHARS)
  bool session_brief = false;    // SessionStart injects recent project memory
  bool observe_tools = false;    // PostToolUse stores an observation (TMCRA_HOOK_OBSERVE_TOOLS)
  // Where turns are stored (the project's scope, or the configured default), and the scopes a
  // prompt recalls from (that one first, then the personal scope).
  std::string store_scope;
  std::vector<std::string> recall_scopes;
  std::chrono::steady_clock::time_point deadline;  // work stops here
};

struct HookDeps {
  tools::MemoryToolDeps tools;  // its default_scope is ignored: scopes come from HookOptions
  HookOptions options;
};

// What an event answers: the text to print on stdout (possibly empty) and the memory it gives
// the session's model.
struct HookAnswer {
  std::string output;
  std::string session;             // the memory session `given` is for
  std::vector<std::string> given;  // keys of the memory blocks the output gives
};

// Runs `input`'s event.
[[nodiscard]] Result<HookAnswer> RunHook(const HookInput& input, HookDeps& deps);

// Records, once the answer is printed, that the session's model has its memory: a later prompt
// of the session is not given it again (until a compaction). Failures are logged.
void RecordGiven(const HookAnswer& answer, HookDeps& deps);

// The turn id the hooks give a turn the host names no id for: from the session, the prompt and
// the turn's ordinal in the session (so a repeated "yes" is a new turn, not a replay).
std::string DerivedTurnId(const std::string& session_id, const std::string& prompt,
                          int64_t ordinal);

}  // namespace tmcra::hooks
