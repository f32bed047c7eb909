// What a tool is to the protocol layer: a spec (name, schemas, hints) and a handler.
//
// Tools register themselves with mcp::Server; the protocol layer validates arguments against
// `input_schema` before the handler runs, and turns a ToolResult into a CallToolResult shaped
// for the negotiated protocol version.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"

namespace tmcra::mcp {

using json = nlohmann::json;

struct ToolSpec {
  std::string name;
  std::string title;  // sent from 2025-06-18 on
  std::string description;
  json input_schema;   // a JSON Schema object with "type":"object"
  json output_schema;  // null, or the schema of structuredContent (sent from 2025-06-18)
  json annotations;    // null, or MCP tool annotations (sent from 2025-03-26)
  // The call may wait, for seconds or minutes, for a job or for the user: a transport that can
  // answer a call later (tmcra-memd's /mcp) runs it apart from the request; others run it inline.
  bool may_wait = false;
};

struct ToolResult {
  json structured = json::object();  // the result object (structuredContent and text)
  bool is_error = false;
  std::string error_text;  // with is_error
  // What the tool built but does not answer with (e.g. a recall's structured evidence), freed
  // only after the answer is written: tearing down a large tree is not on the host's wait.
  json after_reply;

  static ToolResult Ok(json value) { return ToolResult{std::move(value), false, {}, {}}; }
  static ToolResult Fail(std::string text) {
    return ToolResult{json::object(), true, std::move(text), {}};
  }
};

struct ElicitResponse {
  std::string action;  // "accept", "decline" or "cancel"
  json content;        // the submitted values with "accept", else null
};

// Handed to a running tool. Methods are safe to call from the tool's own thread.
class ToolContext {
 public:
  virtual ~ToolContext() = default;

  // The protocol version negotiated by initialize (the newest we support before that).
  virtual std::string protocol_version() const = 0;
  // True once the client cancelled this call or the server is shutting down.
  virtual bool cancelled() const = 0;
  // True when the client declared form elicitation and the version has it (>= 2025-06-18).
  virtual bool can_elicit() const = 0;
  // Sends elicitation/create and waits for the answer. Errors: kUnavailable without the
  // capability, kCancelled when the call is cancelled, kTimeout after `timeout`, kProtocol for
  // a JSON-RPC error, a malformed answer, or accepted content that does not match the schema.
  // Before 2025-11-25, `default` and `pattern` are removed from the schema's properties.
  virtual Result<ElicitResponse> Elicit(const std::string& message, const json& requested_schema,
                                        std::chrono::milliseconds timeout) = 0;
  // Sends notifications/progress for this call when its request carried
  // params._meta.progressToken (else does nothing). `progress` must grow from one call to the
  // next; `total` is left out when unknown (0 or less).
  virtual void Progress(double progress, double total, const std::string& message) {
    (void)progress, (void)total, (void)message;
  }
};

using ToolHandler = std::function<ToolResult(const json& arguments, ToolContext& context)>;

}  // namespace tmcra::mcp
