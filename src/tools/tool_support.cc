#include "src/tools/tool_support.h"

#include "base/identifiers.h"
#include "base/utf8.h"
#include "receipts/receipts.h"
#include "src/api/api_status.h"
#include "src/tools/ingest_body.h"

namespace tmcra::tools {

json NullableString(int max_length) {
  json s{{"type", "string"}};
  if (max_length > 0) s["maxLength"] = max_length;
  return json{{"anyOf", json::array({s, {{"type", "null"}}})}, {"default", nullptr}};
}

std::string OptionalArg(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? Trim(it->get<std::string>()) : std::string();
}

Result<Resolved> Resolve(const json& args, const std::string& default_scope,
                         const std::string& default_agent) {
  Resolved r;
  r.scope = OptionalArg(args, "scope");
  if (r.scope.empty()) r.scope = default_scope;
  if (r.scope.empty()) {
    return Error::Invalid("arguments.scope: scope is required when TMCRA_DEFAULT_SCOPE is not set");
  }
  if (!IsValidScope(r.scope)) {
    return Error::Invalid("arguments.scope: must match " + std::string(kScopePattern));
  }
  std::string agent = OptionalArg(args, "agent_id");
  r.agent_source = agent.empty() ? "configured_default" : "tool_argument";
  if (agent.empty()) agent = default_agent;
  if (!agent.empty()) {
    if (!IsValidAgentId(agent)) {
      return Error::Invalid("arguments.agent_id: must match " + std::string(kAgentIdPattern));
    }
    r.agent_id = agent;
  }
  return r;
}

mcp::ToolResult Failure(const std::string& tool, const Error& error) {
  std::string text = "Error executing tool " + tool + ": ";
  if (error.code == Errc::kProtocol) {
    text += std::string(receipts::kInvalidResponseCode) + ": " + error.message;
  } else if (api::IsServiceAnswer(error)) {
    text += error.api_code + " (HTTP " + std::to_string(api::HttpStatusFor(error.code)) +
            "): " + error.message;
  } else {
    text += error.message;
  }
  return mcp::ToolResult::Fail(text);
}

void RegisterTool(mcp::ToolSet& tools, std::string name, std::string title, std::string description,
                  json input_schema, json annotations, mcp::ToolHandler handler, bool may_wait) {
  mcp::ToolSpec spec;
  spec.name = std::move(name);
  spec.title = std::move(title);
  spec.description = std::move(description);
  spec.input_schema = std::move(input_schema);
  spec.output_schema = {{"type", "object"}, {"additionalProperties", true}};
  spec.annotations = std::move(annotations);
  spec.may_wait = may_wait;
  tools.Add(std::move(spec), std::move(handler));
}

json ReadOnlyHints() { return {{"readOnlyHint", true}, {"openWorldHint", false}}; }

mcp::ToolResult WithFiltering(json receipt, const Filtering& filtering) {
  receipt["content_filter"] = filtering.ToJson();
  return mcp::ToolResult::Ok(std::move(receipt));
}

}  // namespace tmcra::tools
