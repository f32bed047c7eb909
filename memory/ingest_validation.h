// The service's validation of an ingest request (docs/contract.md §1.4.2): strict fields,
// trimmed strings, lengths in code points, unique message ids, metadata limits, actor rules.
// A failure is Error::Api(Errc::kInvalidArgument, "validation_error") whose message starts
// with the field path ("messages.3.role: ...") and whose details hold [{loc, msg, type}] as
// pydantic writes them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace tmcra::memory {

struct IngestMessage {
  std::string message_id;
  std::string role;
  std::string content;
  double occurred_at = 0;   // epoch seconds
  std::string timestamp;    // normalised UTC text
  nlohmann::json metadata;  // object (possibly empty)
};

struct IngestRequest {
  std::string session_id;
  std::vector<IngestMessage> messages;
  std::string consistency;
  std::string slow_policy;
  nlohmann::json metadata;  // object (possibly empty)

  // The normalised payload, as stored with the job and hashed for idempotency.
  nlohmann::json ToJson() const;
  static IngestRequest FromJson(const nlohmann::json& payload);
};

[[nodiscard]] Result<IngestRequest> ValidateIngest(const nlohmann::json& body);

// 422 validation_error naming `loc` (a dotted path) with pydantic-like details.
Error ValidationError(const std::string& loc, const std::string& message,
                      const std::string& type = "value_error");

}  // namespace tmcra::memory
