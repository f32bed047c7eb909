// The turns of a host's session transcript (a JSON-lines file the host writes): Claude Code's
// `~/.claude/projects/<dir>/<session>.jsonl`, Codex's rollout file and Gemini CLI's
// `~/.gemini/tmp/<project>/chats/session-*.jsonl`. Used where a hook's payload does not carry
// the text itself: the final answer of a turn when Stop gives none, the turns about to be
// compacted away (PreCompact), and a turn whose prompt hook never bound it. Lines that are not
// JSON, or not a message, are skipped; what the host injected (hook context, instructions, tool
// results) is not a turn.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "src/hooks/hook_event.h"

namespace tmcra::hooks {

struct TranscriptTurn {
  std::string user;  // the prompt as the user typed it
  // The turn's last answer text (Gemini CLI: all its answer texts, one per line, as its
  // AfterAgent gives them); empty when it has none (yet).
  std::string assistant;
};

// The transcript's turns in order. A slash command starts a turn of its own with an empty
// prompt (so its answer is never taken for the turn before it). Gemini CLI's messages are read
// as its own loader reads them: by id, a message written again replacing its earlier copy in
// place; `$set.messages` replaces the list and `$rewindTo` cuts it. `subagent`: the file is a
// subagent's own transcript (Claude Code marks all of it as a side chain). Errors: the file
// cannot be opened or is over `max_bytes`.
[[nodiscard]] Result<std::vector<TranscriptTurn>> ReadTranscript(Host host, const std::string& path,
                                                                 bool subagent = false,
                                                                 size_t max_bytes = 64u << 20);

// The memory ids ("memory:<id>", as MemoryBlock keys them) the transcript shows the model was
// given since its last compaction (Gemini CLI: since it last rewrote the message list): what
// the host keeps of hook context in the conversation. The ids are found in Gemini CLI's escaped
// context too. Reads at most the last `max_bytes` of the file; empty when it cannot be read.
std::set<std::string> GivenMemoryIds(const std::string& path, size_t max_bytes = 32u << 20);

}  // namespace tmcra::hooks
