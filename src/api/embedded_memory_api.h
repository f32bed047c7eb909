// EmbeddedMemoryApi: the memory engine in-process, on a local SQLite file.
//
// The store is opened on first use, never in the constructor, so `initialize` never waits for
// it; a failed open is reported to that call and tried again on the next. A lock wait that
// outlasts SQLite's busy timeout (other processes writing) is retried a few times before it
// becomes an error, so hosts sharing one data directory do not see "database is locked".
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "memory/engine.h"
#include "src/api/memory_api.h"

namespace tmcra::api {

class EmbeddedMemoryApi final : public MemoryApi {
 public:
  explicit EmbeddedMemoryApi(memory::EngineOptions options);
  ~EmbeddedMemoryApi() override;

  Result<json> Recall(std::string_view scope, const json& body,
                      const RecallOptions& options) override;
  Result<json> Ingest(std::string_view scope, const json& body,
                      const IngestOptions& options) override;
  Result<json> IngestBatch(std::string_view scope, const json& body,
                           const IngestOptions& options) override;
  Result<json> GetJob(std::string_view job_id) override;
  Result<json> Evidence(std::string_view scope, std::string_view memory_id, int limit) override;
  Result<json> Feedback(std::string_view scope, const json& body,
                        const FeedbackOptions& options) override;
  json Describe() const override;
  Result<json> Stats() override;

 private:
  Result<memory::Engine*> Engine();

  memory::EngineOptions options_;
  std::mutex open_mu_;
  std::unique_ptr<memory::Engine> engine_;  // guarded by open_mu_ until set
};

// A MemoryApi that answers every call with one error: for a configuration this build cannot
// serve (e.g. a remote Memory API before the HTTPS client exists).
class UnavailableMemoryApi final : public MemoryApi {
 public:
  UnavailableMemoryApi(json description, std::string reason)
      : description_(std::move(description)), reason_(std::move(reason)) {}
  Result<json> Recall(std::string_view, const json&, const RecallOptions&) override {
    return Fail();
  }
  Result<json> Ingest(std::string_view, const json&, const IngestOptions&) override {
    return Fail();
  }
  Result<json> IngestBatch(std::string_view, const json&, const IngestOptions&) override {
    return Fail();
  }
  Result<json> GetJob(std::string_view) override { return Fail(); }
  Result<json> Evidence(std::string_view, std::string_view, int) override { return Fail(); }
  Result<json> Feedback(std::string_view, const json&, const FeedbackOptions&) override {
    return Fail();
  }
  json Describe() const override { return description_; }
  Result<json> Stats() override { return Fail(); }

 private:
  Error Fail() const { return Error::Unavailable(reason_); }
  json description_;
  std::string reason_;
};

}  // namespace tmcra::api
