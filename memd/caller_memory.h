// The memory as one caller of tmcra-memd's /mcp endpoint may use it: each call is checked
// against the caller's key (its permissions and scopes) as memd's REST routes check a request
// (memd_server.h), and only then passed to the server's memory. A refusal is the error the REST
// route answers (403 forbidden, with the same message), so a tool reports it in the same words
// whichever transport carried the call.
//
// Maintenance (forget, export, import, erase) is not offered through it. Stats gives the figures
// of the caller's scopes only, to a key with memory:read (as GET /v1/scopes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memd/key_store.h"
#include "src/api/memory_api.h"

namespace tmcra::memd {

using json = nlohmann::json;

class CallerMemoryApi final : public api::MemoryApi {
 public:
  // `memory` is not owned and outlives this.
  CallerMemoryApi(api::MemoryApi& memory, ApiKey key);

  const ApiKey& key() const { return key_; }

  [[nodiscard]] Result<json> Recall(std::string_view scope, const json& body,
                                    const api::RecallOptions& options) override;
  [[nodiscard]] Result<json> Ingest(std::string_view scope, const json& body,
                                    const api::IngestOptions& options) override;
  [[nodiscard]] Result<json> IngestBatch(std::string_view scope, const json& body,
                                         const api::IngestOptions& options) override;
  [[nodiscard]] Result<json> GetJob(std::string_view job_id) override;
  [[nodiscard]] Result<std::vector<Result<json>>> GetJobs(
      const std::vector<std::string>& job_ids) override;
  [[nodiscard]] Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                                      int limit) override;
  [[nodiscard]] Result<json> Feedback(std::string_view scope, const json& body,
                                      const api::FeedbackOptions& options) override;
  json Describe() const override;
  [[nodiscard]] Result<json> Stats() override;
  [[nodiscard]] Status Ready() override { return memory_.Ready(); }

 private:
  // The key holds `permission` and may act on `scope`, else the REST route's 403.
  [[nodiscard]] Status Allow(const char* permission, std::string_view scope) const;
  // A job answer the key may see (its scope_name is one of the key's), else 403.
  [[nodiscard]] Result<json> Visible(Result<json> job) const;

  api::MemoryApi& memory_;
  ApiKey key_;
};

}  // namespace tmcra::memd
