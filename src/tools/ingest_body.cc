#include "src/tools/ingest_body.h"

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/identifiers.h"
#include "base/sha256.h"
#include "base/utf8.h"

namespace tmcra::tools {

namespace {

using json = nlohmann::json;

std::optional<std::string> OptionalString(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  return Trim(it->get<std::string>());
}

Error ArgumentError(const std::string& path, const std::string& what) {
  return Error::Invalid("arguments." + path + ": " + what);
}

}  // namespace

Result<json> BuildIngestBody(const json& arguments, const IngestAttribution& attribution,
                             std::string_view now_text) {
  json messages = json::array();
  const json& input = arguments.at("messages");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& m = input[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    const std::string id = Trim(m.at("message_id").get<std::string>());
    const std::string role = m.at("role").get<std::string>();
    const std::string content = Trim(m.at("content").get<std::string>());
    if (id.empty()) return ArgumentError(at + ".message_id", "must not be blank");
    if (content.empty()) return ArgumentError(at + ".content", "must not be blank");
    std::string timestamp(now_text);
    if (auto ts = OptionalString(m, "timestamp")) {
      auto normalised = PydanticTimestamp(*ts);
      if (!normalised) return ArgumentError(at + ".timestamp", "is not an ISO-8601 date-time");
      timestamp = *normalised;
    }
    const auto agent = OptionalString(m, "agent_id");
    const auto target = OptionalString(m, "target_agent_id");
    if (agent && role == "user") {
      return ArgumentError(at + ".agent_id", "user messages use target_agent_id, not agent_id");
    }
    if (target && role != "user") {
      return ArgumentError(at + ".target_agent_id",
                           "target_agent_id is valid only for user messages");
    }
    for (const auto& [name, value] : {std::pair{"agent_id", agent}, {"target_agent_id", target}}) {
      if (value && !IsValidAgentId(*value)) {
        return ArgumentError(at + "." + name, "must match " + std::string(kAgentIdPattern));
      }
    }
    json metadata{{"actor_role", role}};
    if (role == "user") {
      if (target) {
        metadata["target_agent_id"] = *target;
      } else if (attribution.agent_id) {
        metadata["target_agent_id"] = *attribution.agent_id;
      }
    } else if (role == "assistant") {
      if (agent) {
        metadata["agent_id"] = *agent;
      } else if (attribution.agent_id) {
        metadata["agent_id"] = *attribution.agent_id;
      }
    } else if (agent) {
      metadata["agent_id"] = *agent;
    }
    messages.push_back({{"message_id", id},
                        {"role", role},
                        {"content", content},
                        {"timestamp", timestamp},
                        {"metadata", std::move(metadata)}});
  }
  json metadata{{"integration", "mcp"},
                {"integration_version", attribution.integration_version},
                {"scope_sharing", "shared"}};
  if (attribution.agent_id) {
    metadata["agent_id"] = *attribution.agent_id;
    metadata["agent_id_source"] = attribution.agent_id_source;
  }
  return json{{"session_id", Trim(arguments.at("session_id").get<std::string>())},
              {"messages", std::move(messages)},
              {"consistency", arguments.value("consistency", "eventual")},
              {"slow_policy", arguments.value("slow_policy", "auto")},
              {"metadata", std::move(metadata)}};
}

std::string DeriveIdempotencyKey(std::string_view scope, const json& body) {
  const json wrapper{{"scope", scope}, {"body", body}};
  return "mcp-ingest-" + Sha256Hex(CanonicalJson(wrapper)).substr(0, 40);
}

}  // namespace tmcra::tools
