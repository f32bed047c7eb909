// The memory tools over a MemoryApi: tmcra_recall, tmcra_ingest, tmcra_get_job, tmcra_wait_job
// (docs/contract.md §4.3.3, §4.3.4, §4.3.8, §4.3.9; results as §2).
//
// Every answer of the MemoryApi is validated as a receipt before it becomes a result; a bad
// answer is a tool error naming the field, never a success. Arguments are checked completely
// before anything is sent, so a rejected call changes nothing.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "queue/delivery.h"
#include "src/api/memory_api.h"
#include "src/controls/memory_controls.h"
#include "src/mcp/tool_set.h"
#include "src/tools/content_filtering.h"

namespace tmcra::tools {

// The outbox note (queue::Outbox::PutNote) that records what the newest prompt was given, by a
// hook or tmcra_turn_prepare: read by the status line and `tmcra-mcp memory last-recall`.
inline constexpr std::string_view kLastRecallNote = "last_recall";
// The newest recalls before it, newest first (the console's Last recall page).
inline constexpr std::string_view kRecallHistoryNote = "recall_history";
inline constexpr size_t kRecallHistoryLength = 20;
// Records `note` as the last recall and at the head of the history; best effort (a status
// display's, not part of a turn).
void RecordRecall(queue::Outbox& outbox, const nlohmann::json& note);

struct MemoryToolDeps {
  api::MemoryApi* memory = nullptr;  // not owned; outlives the server
  std::string default_scope;         // used when a call names no scope
  std::string default_agent_id;      // TMCRA_AGENT_ID, or empty
  std::string version;               // integration_version in ingest metadata
  // The durable lifecycle. When `delivery` is set, every write goes through its outbox; when
  // `controls` is set, the memory controls (modes, budget, tasks) apply, with `control_key`
  // giving a scope's control key.
  queue::DeliveryService* delivery = nullptr;
  controls::ControlStore* controls = nullptr;
  std::function<std::string(const std::string& scope)> control_key;
  // How long tmcra_turn_commit (read_your_writes) and tmcra_reconcile wait for a write's jobs.
  std::chrono::milliseconds commit_wait = std::chrono::seconds(30);
  // The content filter every stored text goes through (null: none, in tests of the tools
  // alone), and the tally of what it removed, for tmcra_status. Not owned.
  const filter::ContentFilter* filter = nullptr;
  FilterTally* filter_tally = nullptr;
  // Set (to "claude-code" or "codex") when that host's hooks run the turn lifecycle: the
  // tmcra_turn_prepare and tmcra_turn_commit tools then answer that hooks handle it and write
  // nothing. Empty: the tools do the work.
  std::string hooks_host;
};

// tmcra_recall, tmcra_ingest, tmcra_get_job, tmcra_wait_job.
void RegisterMemoryTools(mcp::ToolSet& tools, const MemoryToolDeps& deps);
// tmcra_turn_prepare, tmcra_turn_commit, tmcra_reconcile (REQUIRES: deps.delivery).
void RegisterLifecycleTools(mcp::ToolSet& tools, const MemoryToolDeps& deps);

// The work of tmcra_turn_prepare and tmcra_turn_commit for callers in this process (the host
// hooks, src/hooks): `args` as the tools take them, not checked against the tools' schemas
// (the caller builds them). `recall` false binds the turn without recalling (its
// injectable_context is then empty). `user_only` commits the prepared user message alone, for a
// turn that ended without an answer; assistant_message_id and assistant_content are then unused.
[[nodiscard]] mcp::ToolResult PrepareTurn(const nlohmann::json& args, const MemoryToolDeps& deps,
                                          bool recall);
[[nodiscard]] mcp::ToolResult CommitTurn(const nlohmann::json& args, mcp::ToolContext& ctx,
                                         const MemoryToolDeps& deps, bool user_only);

// The work of tmcra_ingest for callers in this process (the host hooks), `args` as the tool
// takes them, not checked against its schema.
[[nodiscard]] mcp::ToolResult IngestMessages(const nlohmann::json& args,
                                             const MemoryToolDeps& deps);

// The recall receipt a tool returns (§2.2): validated, budget selection against `visible`,
// task hand-off, and the top-level trust boundary; structured `evidence` kept (tmcra_recall
// drops it unless asked for it). Shared by tmcra_recall and tmcra_turn_prepare.
struct RecallRequest {
  std::string scope;
  std::optional<std::string> agent_id;
  std::string session_id;
  std::string query;
  std::string evidence_mode = "auto";
  std::string wait_for_job_id;
  std::string visible;
  // The controls the caller read (ControlStore::ForRecall or BeginTurnForRecall): their hand-off
  // and budget are used. Empty only without memory controls (then the prompt and the default
  // budget).
  std::optional<controls::RecallControls> read_controls;
  // The structured `evidence` is not wanted (tmcra_recall without include_evidence): it may be
  // read without being built, and the receipt's `evidence` is then {}.
  bool evidence_unused = false;
};
[[nodiscard]] Result<nlohmann::json> RecallForTool(const MemoryToolDeps& deps,
                                                   const RecallRequest& request);

}  // namespace tmcra::tools
