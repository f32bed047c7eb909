// tmcra_memory_control (docs/contract.md §4.3.1): the session's memory dashboard, and the
// explicitly requested mode switch, recall budget, task update or correction start, applied to
// the local memory controls of the call's scope (§4.2.3).
//
// The result is TMCRA's result object for the operation; the dashboard also carries
// `delivery` (the queue's counts). Errors (a blank session id, bad arguments, a busy lock) are
// tool errors "Error executing tool tmcra_memory_control: <message>" with TMCRA's messages.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "src/controls/memory_controls.h"
#include "src/mcp/tool_set.h"

namespace tmcra::tools {

struct ControlToolDeps {
  controls::ControlStore* store = nullptr;  // not owned; outlives the server
  std::function<std::string(const std::string& scope)> control_key;  // key for a resolved scope
  std::string default_scope;                                         // when the call names none
  std::function<nlohmann::json()> delivery;  // queue counts for dashboard; may be empty -> {}
};

void RegisterControlTool(mcp::ToolSet& tools, const ControlToolDeps& deps);

}  // namespace tmcra::tools
