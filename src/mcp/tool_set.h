// The tools a server offers, apart from any transport: registration, their definitions as
// tools/list gives them for a protocol version, a tools/call run to its result (the arguments
// checked against the input schema first, a handler's exception caught), the result shaped for
// the version, and the answer to initialize. The stdio server (server.h) and tmcra-memd's
// Streamable HTTP endpoint (memd/mcp_endpoint.h) both serve a ToolSet, so each tool has one
// implementation for both transports.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/mcp/tool.h"

namespace tmcra::mcp {

// Protocol versions we speak, oldest first; the last is what we answer when the client asks
// for one we do not know.
inline constexpr std::string_view kSupportedVersions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                                          "2025-11-25"};
inline constexpr std::string_view kNewestVersion = "2025-11-25";
// structuredContent and outputSchema exist from this version on.
inline constexpr std::string_view kStructuredContentVersion = "2025-06-18";

bool IsSupportedVersion(std::string_view version);

// What a server says of itself in its answer to initialize.
struct ServerIdentity {
  std::string name = "tmcra-mcp";
  std::string title;
  std::string version;
  std::string instructions;
};

// What initialize settled: the version (the client's when we speak it, else kNewestVersion),
// whether the client declared form elicitation, and the answer's result object.
struct Negotiation {
  std::string version;
  bool elicitation = false;
  json result;
};
// REQUIRES: params.protocolVersion is a string.
Negotiation Negotiate(const ServerIdentity& identity, const json& params);

class ToolSet {
 public:
  struct Tool {
    ToolSpec spec;
    ToolHandler handler;
  };

  void Add(ToolSpec spec, ToolHandler handler);
  // nullptr when no tool has this name.
  const Tool* Find(std::string_view name) const;
  const std::vector<Tool>& tools() const { return tools_; }

  // The result of tools/list for `version`: {"tools": [definition, ...]}, in registration order.
  json List(const std::string& version) const;
  json Definition(const Tool& tool, const std::string& version) const;

  // The arguments of a tools/call's params: the object (absent or null: {}), or std::nullopt when
  // they are something else (the caller answers -32602).
  static std::optional<json> Arguments(const json& params);
  // Runs `tool` on `arguments`: arguments that break its input schema are a tool error naming
  // the field, a handler that throws or answers a non-object is "<name> failed: internal error".
  ToolResult Run(const Tool& tool, const json& arguments, ToolContext& context) const;
  // A result as CallToolResult for `version`: {"content": [text], "structuredContent"?} or
  // {"content": [error text], "isError": true}.
  static json Shape(ToolResult result, const std::string& version);

 private:
  std::vector<Tool> tools_;
};

}  // namespace tmcra::mcp
