// The wire body of tmcra_ingest and its derived idempotency key (docs/contract.md §1.4.2,
// §3.5, §4.3.4), as pure functions so they can be checked against TMCRA's own vectors.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::tools {

struct IngestAttribution {
  std::optional<std::string> agent_id;  // resolved call-level agent id
  std::string agent_id_source;          // "tool_argument" or "configured_default"
  std::string integration_version;      // our version
};

// Builds {session_id, messages, consistency, slow_policy, metadata} from schema-valid tool
// arguments. Message strings are trimmed; a missing timestamp becomes `now_text`; per-message
// metadata carries actor_role and the agent attribution rules of §1.4.2. Errors name the
// argument ("arguments.messages[1].agent_id: user messages use target_agent_id, not agent_id").
[[nodiscard]] Result<nlohmann::json> BuildIngestBody(const nlohmann::json& arguments,
                                                     const IngestAttribution& attribution,
                                                     std::string_view now_text);

// "mcp-ingest-" + sha256(canonical({"scope": scope, "body": body}))[:40].
std::string DeriveIdempotencyKey(std::string_view scope, const nlohmann::json& body);

}  // namespace tmcra::tools
