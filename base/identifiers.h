// The grammars of the names that travel in the Memory API's paths, headers and bodies, in one
// place for tmcra-mcp, its hooks, the engine and tmcra-memd (docs/contract.md, "Identifier
// grammars"). A value that fails its grammar is refused before it is used: the service answers
// 422 for it, and the grammars keep "/", "..", "?", "#", "%", CR, LF and NUL out of request
// paths and headers. The four names are ASCII; ids are free text. Hand-written matchers, not
// std::regex: they run on every request, and libstdc++'s regex allocates and recurses.
#pragma once

#include <cstddef>
#include <string_view>

namespace tmcra {

// Scope names (a memory's namespace; also a path segment).
inline constexpr std::string_view kScopePattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$";
bool IsValidScope(std::string_view scope);

// X-TMCRA-Agent-ID and a body's agent_id.
inline constexpr std::string_view kAgentIdPattern = "^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}$";
bool IsValidAgentId(std::string_view agent_id);

// X-TMCRA-Integration-ID.
inline constexpr std::string_view kIntegrationIdPattern = "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$";
bool IsValidIntegrationId(std::string_view integration_id);

// A client's X-Request-ID that tmcra-memd echoes and logs: the integration-id grammar.
bool IsValidRequestId(std::string_view request_id);

// Session, turn and message ids are opaque text: after trimming surrounding white space, 1 to
// kMaxIdChars characters (Unicode code points). The tools' schemas and the engine's request
// validation both take the bound from here.
inline constexpr size_t kMaxIdChars = 200;

}  // namespace tmcra
