// A Memory API that answers every call with an error, for tests that script only the calls
// they are about: derive, and override those.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/result.h"
#include "src/api/memory_api.h"

namespace tmcra::testing {

class UnusedMemoryApi : public api::MemoryApi {
 public:
  using json = nlohmann::json;

  Result<json> Recall(std::string_view, const json&, const api::RecallOptions&) override {
    return Unused();
  }
  Result<json> Ingest(std::string_view, const json&, const api::IngestOptions&) override {
    return Unused();
  }
  Result<json> IngestBatch(std::string_view, const json&, const api::IngestOptions&) override {
    return Unused();
  }
  Result<json> GetJob(std::string_view) override { return Unused(); }
  Result<json> Evidence(std::string_view, std::string_view, int) override { return Unused(); }
  Result<json> Feedback(std::string_view, const json&, const api::FeedbackOptions&) override {
    return Unused();
  }
  json Describe() const override { return json{{"mode", "test"}}; }
  Result<json> Stats() override { return json::object(); }

 protected:
  // What every call not overridden answers: not retryable, so no caller waits on it.
  virtual Error Unused() const { return Error::Internal("unused"); }
};

}  // namespace tmcra::testing
