#include "src/tools/control_tool.h"

#include "src/tools/tool_support.h"

namespace tmcra::tools {

namespace {

constexpr char kTool[] = "tmcra_memory_control";

json ControlSchema() {
  return json{{"type", "object"},
              {"properties",
               {{"session_id", {{"type", "string"}, {"minLength", 1}}},
                {"operation",
                 {{"type", "string"},
                  {"enum", {"dashboard", "mode", "budget", "task", "correction_start"}}}},
                {"scope", NullableString(128)},
                {"arguments",
                 {{"anyOf", json::array({{{"type", "object"}, {"additionalProperties", true}},
                                         {{"type", "null"}}})},
                  {"default", nullptr}}}}},
              {"required", {"session_id", "operation"}},
              {"additionalProperties", false}};
}

mcp::ToolResult Control(const json& args, const ControlToolDeps& deps) {
  if (deps.store == nullptr || !deps.control_key) {
    return Failure(kTool, Error::Internal("memory controls are not configured"));
  }
  // The scope check is tool_support's Resolve, shared with the memory tools; this tool has no
  // agent_id, so only the scope part applies.
  auto resolved = Resolve(args, deps.default_scope, std::string());
  if (!resolved) return Failure(kTool, resolved.error());
  // The exact session id (not trimmed): its hash names the session's row, as in TMCRA.
  const std::string session_id = args["session_id"].get<std::string>();
  const std::string operation = args["operation"].get<std::string>();
  const auto given = args.find("arguments");
  const json arguments = given == args.end() || given->is_null() ? json::object() : *given;
  auto result =
      deps.store->Control(deps.control_key(resolved->scope), session_id, operation, arguments);
  if (!result) return Failure(kTool, result.error());
  json out = std::move(*result);
  if (operation == "dashboard") out["delivery"] = deps.delivery ? deps.delivery() : json::object();
  return mcp::ToolResult::Ok(std::move(out));
}

}  // namespace

void RegisterControlTool(mcp::ToolSet& tools, const ControlToolDeps& deps) {
  RegisterTool(tools, kTool, "Memory controls",
               "Inspect memory or apply an explicitly requested session mode, task update or "
               "recall budget. Use exact session_id; normal, recall_only and off are supported. "
               "Mark task completion only when intended.",
               ControlSchema(),
               // A mode switch discards captures not yet delivered and a task update overwrites
               // fields, so the worst case is a non-additive local update.
               {{"readOnlyHint", false},
                {"destructiveHint", true},
                {"idempotentHint", false},
                {"openWorldHint", false}},
               [deps](const json& args, mcp::ToolContext&) { return Control(args, deps); });
}

}  // namespace tmcra::tools
