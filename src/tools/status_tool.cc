#include "src/tools/status_tool.h"

#include <unistd.h>

#include <chrono>

#include "base/version.h"

namespace tmcra::tools {

namespace {

using json = nlohmann::json;

json OutputSchema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "server": {"type": "string"},
      "version": {"type": "string"},
      "protocol_version": {"type": "string"},
      "memory_mode": {"type": "string", "enum": ["embedded", "remote", "memd", "misconfigured"]},
      "memory": {"type": "object"},
      "store": {"type": "object"},
      "delivery": {"type": "object"},
      "pid": {"type": "integer"}
    },
    "required": ["server", "version", "protocol_version", "memory_mode", "memory"]
  })");
}

// memory_mode and memory: the server's own memory, or the settings' (an invalid setting since
// startup is reported rather than failing the call).
void DescribeMemory(const StatusDeps& deps, json& out) {
  if (deps.server_memory) {
    out["memory_mode"] = "memd";
    out["memory"] = deps.server_memory();
    return;
  }
  const auto settings = config::LoadSettings(deps.env, std::chrono::system_clock::now());
  out["memory_mode"] = !settings ? "misconfigured" : settings->remote() ? "remote" : "embedded";
  out["memory"] = settings ? settings->ToJson() : json{{"error", settings.error().message}};
}

}  // namespace

void RegisterStatusTool(mcp::ToolSet& tools, StatusDeps deps) {
  mcp::ToolSpec spec;
  spec.name = "tmcra_status";
  spec.title = "Memory status";
  spec.description =
      "Show this memory server's version, the negotiated MCP protocol version, and which memory "
      "it uses (embedded local file or remote Memory API) with its resolved location. "
      "Credentials are never shown.";
  spec.input_schema =
      json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
  spec.output_schema = OutputSchema();
  spec.annotations =
      json{{"title", "Memory status"}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tools.Add(std::move(spec), [deps = std::move(deps)](const json&, mcp::ToolContext& ctx) {
    // "remote" covers the service and local modes; memory.mode tells them apart.
    json out{{"server", kProductName},
             {"version", kVersion},
             {"protocol_version", ctx.protocol_version()},
             {"pid", static_cast<long>(getpid())}};
    DescribeMemory(deps, out);
    if (deps.memory != nullptr) {
      auto stats = deps.memory->Stats();
      out["store"] = stats ? json{{"reachable", true}, {"figures", *stats}}
                           : json{{"reachable", false}, {"error", stats.error().message}};
    }
    if (deps.delivery != nullptr) {
      json delivery{{"this_process_holds_delivery", deps.delivery->holds_lease()},
                    {"owner", deps.delivery->owner()}};
      auto outbox = deps.delivery->outbox();
      if (!outbox) {
        delivery["error"] = outbox.error().message;
      } else {
        auto counts = (*outbox)->GetCounts();
        if (counts) {
          delivery["queue"] = counts->ToJson();
        } else {
          delivery["error"] = counts.error().message;
        }
        auto holder = (*outbox)->DeliveryLeaseHolder();
        delivery["lease_holder"] = holder ? *holder : json(nullptr);
      }
      out["delivery"] = std::move(delivery);
    }
    if (deps.filter_tally != nullptr) out["content_filter"] = deps.filter_tally->ToJson();
    return mcp::ToolResult::Ok(std::move(out));
  });
}

}  // namespace tmcra::tools
