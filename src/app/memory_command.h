// `tmcra-mcp memory COMMAND ...`: see, search, export, import and forget what memory holds, and
// set its retention (docs/memory-commands.md). The commands run on the memory the environment
// selects, through the same MemoryApi calls as the tools; a memory that does not offer a call
// (TMCRA's hosted service has no deletion or export) says so and nothing changes. Output is for
// a person unless --json is given; errors go to stderr with exit status 1 (2 for a usage error).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "queue/outbox.h"
#include "src/app/app_wiring.h"

namespace tmcra::app {

// `args`: what follows "memory" on the command line. Returns the exit status.
int RunMemoryCommand(const std::vector<std::string_view>& args);

// What the commands and the console (src/app/console.h) share, so both make the same calls and
// give the same answers.
struct ForgetArgs {
  std::optional<std::string> turn;
  std::optional<std::string> session;
  std::optional<std::string> scope;
  std::optional<std::string> before;
  std::optional<std::string> match;
  bool dry_run = false;
};
// A forget in the memory and the outbox (`outbox` may be null): {dry_run, records, feedback,
// outbox_items, outbox_pending, turns, preview, erase}.
Result<nlohmann::json> ForgetMemory(App& app, queue::Outbox* outbox, const ForgetArgs& args);
// The recall of `query` in `scope` as search results: {scope_name, query, route, results:
// [{window, window_score, memory_id, session_id, role, timestamp, hit, text, score, why}],
// prompt_bytes}.
Result<nlohmann::json> SearchMemory(App& app, const std::string& scope, const std::string& query);

}  // namespace tmcra::app
