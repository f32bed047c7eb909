// tmcra_status: what this server is, which protocol version it speaks and where its memory
// lives, with every credential redacted, and the memory's own figures (records, scopes, pending
// jobs, file size). Later issues add queue and delivery figures.
#pragma once

#include <functional>

#include "queue/delivery.h"
#include "src/api/memory_api.h"
#include "src/config/settings.h"
#include "src/mcp/tool_set.h"
#include "src/tools/content_filtering.h"

namespace tmcra::tools {

struct StatusDeps {
  config::EnvLookup env;             // resolved on every call, so the answer is current
  api::MemoryApi* memory = nullptr;  // when set, its figures are reported (opens the store)
  queue::DeliveryService* delivery = nullptr;  // when set, the outbox's figures are reported
  // When set, what the content filter removed from this process's writes (counts by kind).
  const FilterTally* filter_tally = nullptr;
  // Set where the tools are served by the memory's own server (tmcra-memd's /mcp): `memory_mode`
  // is then "memd" and `memory` what this returns, instead of the settings `env` names.
  std::function<nlohmann::json()> server_memory{};
};

void RegisterStatusTool(mcp::ToolSet& tools, StatusDeps deps);

}  // namespace tmcra::tools
