// tmcra_feedback (docs/contract.md §4.3.2): ignore, correct or restore exact memory sources,
// only after the user confirmed the change through MCP elicitation.
//
// The flow is TMCRA's, step by step: capture the session policy, always suppress the current
// turn's capture, skip when the session may not write, validate, fetch the exact source of every
// memory id (§1.4.4), show it (and the replacement) in an elicitation/create form, and write the
// feedback (§1.4.5) only when the user accepted with confirm === true and the session's policy
// is unchanged. Every other outcome is a result {"applied": false, "status": ...} and writes
// nothing; a cancelled call is a tool error and writes nothing. The FeedbackView written is
// returned only when its feedback_id (and correction_job_id, unless null) is a safe id
// (receipts::IsSafeServerId), else an invalid_response_contract error.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "filter/content_filter.h"
#include "src/api/memory_api.h"
#include "src/controls/memory_controls.h"
#include "src/mcp/tool_set.h"

namespace tmcra::tools {

struct FeedbackToolDeps {
  api::MemoryApi* memory = nullptr;            // not owned; outlives the server
  controls::ControlStore* controls = nullptr;  // not owned; outlives the server
  std::function<std::string(const std::string& scope)> control_key;
  std::string default_scope;                               // used when a call names no scope
  std::chrono::milliseconds confirmation_timeout{120000};  // tests shorten it
  // The content filter a replacement goes through before the user is shown it (null: none).
  const filter::ContentFilter* filter = nullptr;
};

void RegisterFeedbackTool(mcp::ToolSet& tools, const FeedbackToolDeps& deps);

// The exact-source rule of §1.4.4 (with its RECOMMENDATION): `page` is the evidence of
// `memory_id` in `scope`, has items that all carry a text, and signals no further data
// (has_more truthy, truncated true or next_cursor non-null all mean "not exact"). On success
// `*text` is the items' texts joined with "\n\n".
bool ExactEvidence(const nlohmann::json& page, const std::string& memory_id,
                   const std::string& scope, std::string* text);

}  // namespace tmcra::tools
