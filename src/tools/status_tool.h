// tmcra_status: what this server is, which protocol version it speaks and where its memory
// lives, with every credential redacted. Later issues add queue and delivery figures.
#pragma once

#include "src/config/memory_target.h"
#include "src/mcp/server.h"

namespace tmcra::tools {

struct StatusDeps {
  config::EnvLookup env;  // resolved on every call, so the answer is current
};

void RegisterStatusTool(mcp::Server& server, StatusDeps deps);

}  // namespace tmcra::tools
