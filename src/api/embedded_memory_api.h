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
  Result<json> ScopeStats() override;
  Result<json> Forget(std::string_view scope, const json& body) override;
  Result<json> ForgetOldest(int64_t bytes) override;
  Result<json> Erase() override;
  Status Export(std::string_view scope,
                const std::function<Status(const json& line)>& sink) override;
  Result<json> Import(std::string_view scope, const json& lines) override;
  json Describe() const override;
  Result<json> Stats() override;
  Status Ready() override;

 private:
  Result<memory::Engine*> Engine();

  memory::EngineOptions options_;
  std::mutex open_mu_;
  std::unique_ptr<memory::Engine> engine_;  // guarded by open_mu_ until set
};

}  // namespace tmcra::api
