// JSON-RPC 2.0 envelope helpers for MCP over stdio: error codes, message builders, the parse
// step with its limits, and the one serializer allowed to produce stdout bytes.
//
// Knows nothing of tools or memory.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_depth.h"

namespace tmcra::mcp {

using json = nlohmann::json;

namespace rpc {
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
}  // namespace rpc

// A line longer than this is rejected without being parsed (the TS SDK client caps its own
// buffer at 10 MiB, so nothing legitimate is larger).
inline constexpr size_t kMaxLineBytes = 8u * 1024u * 1024u;
// Deeper nesting is rejected before parsing, so hostile input cannot exhaust the stack.
inline constexpr int kMaxNestingDepth = 64;

json MakeResult(const json& id, json result);
json MakeError(const json& id, int code, std::string_view message, json data = nullptr);
json MakeRequest(const json& id, std::string_view method, json params);
json MakeNotification(std::string_view method, json params);

// True for the id types MCP allows: a string or an integer (never null, a float or a bool).
bool IsValidRequestId(const json& id);

// Deepest nesting of arrays and objects in `text`, counting only brackets outside strings.
// Stops counting once `limit` is exceeded and returns limit + 1.
inline int NestingDepth(std::string_view text, int limit) { return JsonNestingDepth(text, limit); }

struct ParsedLine {
  json value;          // the message, when error_code == 0
  int error_code = 0;  // rpc::kParseError or rpc::kInvalidRequest
  std::string error_message;
  // With error_code 0: the line held numbers that no double holds (1e400), which `value` holds
  // as null, so that the message can still be answered, with its id, as invalid input.
  // `number_paths` says where (ReadJsonStrictPastOverflow: the first one, and in a batch the
  // first of each message that holds one).
  bool number_out_of_range = false;
  std::vector<json> number_paths;
};

// Parses one framed line, enforcing kMaxLineBytes and kMaxNestingDepth. A repeated key keeps
// its last value, as json::parse does.
ParsedLine ParseLine(std::string_view line);

// The keys and indices of `path` from element `from` on, as text after `prefix`:
// ("arguments", ["params", "arguments", "items", 0, "n"], 2) gives "arguments.items[0].n".
std::string PathText(std::string prefix, const json& path, size_t from = 0);

// Compact one-line UTF-8 text of `message`; invalid UTF-8 is replaced, never thrown.
std::string Serialize(const json& message);

// The line of a successful tools/call answer, byte for byte
//   Serialize(MakeResult(id, {"content": [{"type": "text", "text": Serialize(structured)}],
//                             "structuredContent": structured}))
// (without "structuredContent" when `with_structured` is false), but `structured` is
// serialized once: its text is reused for structuredContent instead of being written again.
std::string SerializeToolResult(const json& id, const json& structured, bool with_structured);

}  // namespace tmcra::mcp
