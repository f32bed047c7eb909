#include "memd/caller_memory.h"

#include <utility>

namespace tmcra::memd {

namespace {

Error Forbidden(std::string message) {
  return Error::Api(Errc::kPermissionDenied, "forbidden", std::move(message));
}

}  // namespace

CallerMemoryApi::CallerMemoryApi(api::MemoryApi& memory, ApiKey key)
    : memory_(memory), key_(std::move(key)) {}

Status CallerMemoryApi::Allow(const char* permission, std::string_view scope) const {
  if (!key_.Has(permission)) return Forbidden(std::string(permission) + " is required");
  if (!key_.AllowsScope(scope)) return Forbidden("the API key is not valid for this scope");
  return Ok();
}

Result<json> CallerMemoryApi::Visible(Result<json> job) const {
  if (!job || !job->is_object()) return job;
  auto scope = job->find("scope_name");
  if (scope != job->end() && scope->is_string() && !key_.AllowsScope(scope->get<std::string>())) {
    return Forbidden("the API key is not valid for this job's scope");
  }
  return job;
}

Result<json> CallerMemoryApi::Recall(std::string_view scope, const json& body,
                                     const api::RecallOptions& options) {
  TMCRA_RETURN_IF_ERROR(Allow(kPermRead, scope));
  return memory_.Recall(scope, body, options);
}

Result<json> CallerMemoryApi::Ingest(std::string_view scope, const json& body,
                                     const api::IngestOptions& options) {
  TMCRA_RETURN_IF_ERROR(Allow(kPermWrite, scope));
  return memory_.Ingest(scope, body, options);
}

Result<json> CallerMemoryApi::IngestBatch(std::string_view scope, const json& body,
                                          const api::IngestOptions& options) {
  TMCRA_RETURN_IF_ERROR(Allow(kPermWrite, scope));
  return memory_.IngestBatch(scope, body, options);
}

Result<json> CallerMemoryApi::GetJob(std::string_view job_id) {
  if (!key_.Has(kPermRead)) return Forbidden(std::string(kPermRead) + " is required");
  return Visible(memory_.GetJob(job_id));
}

Result<std::vector<Result<json>>> CallerMemoryApi::GetJobs(
    const std::vector<std::string>& job_ids) {
  if (!key_.Has(kPermRead)) return Forbidden(std::string(kPermRead) + " is required");
  TMCRA_ASSIGN_OR_RETURN(std::vector<Result<json>> jobs, memory_.GetJobs(job_ids));
  for (auto& job : jobs) job = Visible(std::move(job));
  return jobs;
}

Result<json> CallerMemoryApi::Evidence(std::string_view scope, std::string_view memory_id,
                                       int limit) {
  TMCRA_RETURN_IF_ERROR(Allow(kPermRead, scope));
  return memory_.Evidence(scope, memory_id, limit);
}

Result<json> CallerMemoryApi::Feedback(std::string_view scope, const json& body,
                                       const api::FeedbackOptions& options) {
  TMCRA_RETURN_IF_ERROR(Allow(kPermFeedback, scope));
  auto action = body.find("action");
  if (action != body.end() && *action == "correct" && !key_.Has(kPermWrite)) {
    return Forbidden("memory:write is required to save a correction");
  }
  return memory_.Feedback(scope, body, options);
}

json CallerMemoryApi::Describe() const {
  return json{{"mode", "memd"},
              {"key_id", key_.key_id},
              {"permissions", key_.permissions},
              {"scope_names", key_.scope_names},
              {"scope_prefixes", key_.scope_prefixes}};
}

Result<json> CallerMemoryApi::Stats() {
  if (!key_.Has(kPermRead)) return Forbidden(std::string(kPermRead) + " is required");
  TMCRA_ASSIGN_OR_RETURN(json stats, memory_.ScopeStats());
  json visible = json::array();
  for (const json& scope : stats.value("scopes", json::array())) {
    if (key_.AllowsScope(scope.value("scope_name", ""))) visible.push_back(scope);
  }
  return json{{"scopes", std::move(visible)}};
}

}  // namespace tmcra::memd
