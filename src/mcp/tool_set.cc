#include "src/mcp/tool_set.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "src/mcp/jsonrpc.h"
#include "src/mcp/schema.h"

namespace tmcra::mcp {

bool IsSupportedVersion(std::string_view version) {
  for (auto v : kSupportedVersions) {
    if (v == version) return true;
  }
  return false;
}

namespace {

// 2025-11-25: {} means form only; {"form":{}} and/or {"url":{}} list the modes.
bool DeclaresFormElicitation(const json& params) {
  auto caps = params.find("capabilities");
  if (caps == params.end() || !caps->is_object()) return false;
  auto e = caps->find("elicitation");
  return e != caps->end() && e->is_object() && (e->empty() || e->contains("form"));
}

}  // namespace

Negotiation Negotiate(const ServerIdentity& identity, const json& params) {
  const std::string requested = params["protocolVersion"].get<std::string>();
  Negotiation out;
  out.version = IsSupportedVersion(requested) ? requested : std::string(kNewestVersion);
  out.elicitation = DeclaresFormElicitation(params);
  if (requested != out.version) {
    // The client's text only when it looks like a version: it may come from the network.
    const bool dated =
        requested.size() == 10 && requested.find_first_not_of("0123456789-") == std::string::npos;
    spdlog::info("client asked for protocol {}; answering {}",
                 dated ? requested : std::string("(not a version)"), out.version);
  }
  json server_info{{"name", identity.name}, {"version", identity.version}};
  if (out.version >= "2025-06-18" && !identity.title.empty()) server_info["title"] = identity.title;
  out.result = json{{"protocolVersion", out.version},
                    {"capabilities", {{"tools", json::object()}}},
                    {"serverInfo", std::move(server_info)}};
  if (!identity.instructions.empty()) out.result["instructions"] = identity.instructions;
  return out;
}

void ToolSet::Add(ToolSpec spec, ToolHandler handler) {
  tools_.push_back(Tool{std::move(spec), std::move(handler)});
}

const ToolSet::Tool* ToolSet::Find(std::string_view name) const {
  for (const auto& tool : tools_) {
    if (tool.spec.name == name) return &tool;
  }
  return nullptr;
}

json ToolSet::List(const std::string& version) const {
  json tools = json::array();
  for (const auto& tool : tools_) tools.push_back(Definition(tool, version));
  return json{{"tools", std::move(tools)}};
}

json ToolSet::Definition(const Tool& tool, const std::string& version) const {
  json def{{"name", tool.spec.name},
           {"description", tool.spec.description},
           {"inputSchema", tool.spec.input_schema}};
  if (version >= "2025-03-26" && !tool.spec.annotations.is_null()) {
    def["annotations"] = tool.spec.annotations;
  }
  if (version >= "2025-06-18") {
    if (!tool.spec.title.empty()) def["title"] = tool.spec.title;
    if (!tool.spec.output_schema.is_null()) def["outputSchema"] = tool.spec.output_schema;
  }
  return def;
}

std::optional<json> ToolSet::Arguments(const json& params) {
  auto it = params.find("arguments");
  if (it == params.end() || it->is_null()) return json::object();
  if (!it->is_object()) return std::nullopt;
  return *it;
}

ToolResult ToolSet::Run(const Tool& tool, const json& arguments, ToolContext& context) const {
  const std::string& name = tool.spec.name;
  if (auto problem = ValidateSchema(arguments, tool.spec.input_schema)) {
    return ToolResult::Fail("Invalid arguments for " + name + ": " + *problem);
  }
  try {
    ToolResult result = tool.handler(arguments, context);
    if (!result.is_error && !result.structured.is_object()) {
      spdlog::error("tool {} returned a non-object result", name);
      return ToolResult::Fail(name + " failed: internal error");
    }
    return result;
  } catch (const std::exception& e) {
    spdlog::error("tool {} failed: {}", name, e.what());
    return ToolResult::Fail(name + " failed: internal error");
  }
}

json ToolSet::Shape(ToolResult result, const std::string& version) {
  if (result.is_error) {
    return json{
        {"content", json::array({{{"type", "text"}, {"text", std::move(result.error_text)}}})},
        {"isError", true}};
  }
  json out{{"content", json::array({{{"type", "text"}, {"text", Serialize(result.structured)}}})}};
  if (version >= kStructuredContentVersion) out["structuredContent"] = std::move(result.structured);
  return out;
}

}  // namespace tmcra::mcp
