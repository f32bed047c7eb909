// The memory tools over a MemoryApi: tmcra_recall, tmcra_ingest, tmcra_get_job, tmcra_wait_job
// (tmcra-contract.md §4.3.3, §4.3.4, §4.3.8, §4.3.9; results as §2).
//
// Every answer of the MemoryApi is validated as a receipt before it becomes a result; a bad
// answer is a tool error naming the field, never a success. Arguments are checked completely
// before anything is sent, so a rejected call changes nothing.
#pragma once

#include <string>

#include "src/api/memory_api.h"
#include "src/mcp/server.h"

namespace tmcra::tools {

struct MemoryToolDeps {
  api::MemoryApi* memory = nullptr;    // not owned; outlives the server
  std::string default_scope;           // used when a call names no scope
  std::string default_agent_id;        // TMCRA_AGENT_ID, or empty
  std::string version;                 // integration_version in ingest metadata
};

void RegisterMemoryTools(mcp::Server& server, const MemoryToolDeps& deps);

}  // namespace tmcra::tools
