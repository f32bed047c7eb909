// MemoryApi: the Memory API as the tools see it, returning the service's wire JSON.
//
// Two implementations are interchangeable: EmbeddedMemoryApi runs the memory engine in-process
// on a local SQLite file; HttpMemoryApi (http_memory_api.h) talks HTTPS to TMCRA's hosted
// service or a tmcra-memd. Tools validate every answer as a receipt (receipts/) the same way
// for both.
//
// Errors: Error::Api(kind, code, message) for answers the service would give (a refused field,
// not found, a conflict...: IsServiceAnswer in api_status.h), retryable exactly when the HTTP
// client would retry; other Errors for local failures.
// Implementations are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_reader.h"
#include "base/result.h"
#include "src/api/api_status.h"

namespace tmcra::api {

using json = nlohmann::json;

// The most job ids one GetJobs call (POST /v1/jobs/batch) takes.
inline constexpr size_t kMaxJobsPerBatch = 100;

// tmcra-memd names what it does beyond TMCRA's service in a header on every answer (a
// comma-separated list). kFeaturePromptOnlySnapshot: a recall with
// "response_projection": "prompt_only" keeps evidence.snapshot (so the receipt's watermarks
// are those of a full answer), where the service answers evidence {}.
inline constexpr std::string_view kFeaturesHeader = "X-TMCRA-Memd-Features";
inline constexpr std::string_view kFeaturePromptOnlySnapshot = "prompt-only-snapshot";

// A recall request `body` (an object) asking for the prompt evidence only
// (RecallOptions::structured_evidence_unused).
inline json PromptOnlyBody(const json& body) {
  json out = body;
  out["response_projection"] = "prompt_only";
  return out;
}

struct IngestOptions {
  std::string idempotency_key;          // Idempotency-Key header
  std::optional<std::string> agent_id;  // X-TMCRA-Agent-ID
  // The other attribution headers, as a server (tmcra-memd) received them; they are part of the
  // idempotency hash. Unset: what tmcra-mcp sends (platform "mcp", no integration id).
  // (Default member initializers keep `{key, agent_id}` aggregate initialisation warning-free.)
  std::optional<std::string> client_platform{};  // X-TMCRA-Client-Platform
  std::optional<std::string> integration_id{};   // X-TMCRA-Integration-ID
};

struct RecallOptions {
  std::optional<std::string> agent_id;  // X-TMCRA-Agent-ID
  // Set: the answer's `evidence` may come back elided (checked as strictly, built as {}, with
  // what the ElidedMember watches gathered; `elided` says whether it was). An implementation
  // that has no answer text to read (the embedded engine) leaves it unset and the evidence
  // whole.
  ElidedMember* elide_evidence = nullptr;
  // The structured `evidence` will be dropped (tmcra_recall without include_structured_evidence):
  // a memory known to keep the snapshot watermark under "response_projection": "prompt_only"
  // (the embedded engine; a tmcra-memd, once it has said so in kFeaturesHeader) is asked for
  // that projection, and leaves the windows' record copies out of `evidence`. The receipt is
  // the same.
  bool structured_evidence_unused = false;
};

struct FeedbackOptions {
  std::string idempotency_key;  // Idempotency-Key header
};

class MemoryApi {
 public:
  virtual ~MemoryApi() = default;

  // POST /v1/scopes/{scope}/recall (200).
  [[nodiscard]] virtual Result<json> Recall(std::string_view scope, const json& body,
                                            const RecallOptions& options) = 0;
  // POST /v1/scopes/{scope}/ingest (202), a JobView.
  [[nodiscard]] virtual Result<json> Ingest(std::string_view scope, const json& body,
                                            const IngestOptions& options) = 0;
  // POST /v1/scopes/{scope}/ingest/batch (202): body {"items": [ingest request +
  // "idempotency_key", ...]}, 1..100 items and at most 5000 messages, all of `scope` and of
  // `options.agent_id` (options.idempotency_key is unused: each item carries its own). Answers
  // {"scope_name", "jobs": [JobView per item, in order]}. The batch is stored whole or not at
  // all: one invalid item (or a key bound to other content) refuses all of it, with an error
  // naming the item ("items.3.messages.0.role: ...").
  [[nodiscard]] virtual Result<json> IngestBatch(std::string_view scope, const json& body,
                                                 const IngestOptions& options) = 0;
  // GET /v1/jobs/{job_id} (200), a JobView.
  [[nodiscard]] virtual Result<json> GetJob(std::string_view job_id) = 0;
  // Several jobs at once (tmcra-memd's POST /v1/jobs/batch, 1..kMaxJobsPerBatch distinct ids):
  // per id, in order, its JobView or the error GET /v1/jobs/{id} would give (404 for an unknown
  // job, 403 for one of a scope the key may not read). An error for the whole call means no
  // job's result is known; a memory without the endpoint (TMCRA's hosted service) answers one
  // that is not retryable, and the caller asks for the jobs one by one. The default asks GetJob
  // for each id.
  [[nodiscard]] virtual Result<std::vector<Result<json>>> GetJobs(
      const std::vector<std::string>& job_ids) {
    std::vector<Result<json>> out;
    out.reserve(job_ids.size());
    for (const auto& id : job_ids) out.push_back(GetJob(id));
    return out;
  }
  // GET /v1/scopes/{scope}/memory-graph/nodes/{memory_id}/evidence?limit=N (200).
  [[nodiscard]] virtual Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                                              int limit) = 0;
  // POST /v1/scopes/{scope}/feedback (201), a FeedbackView.
  [[nodiscard]] virtual Result<json> Feedback(std::string_view scope, const json& body,
                                              const FeedbackOptions& options) = 0;

  // Maintenance of what the memory holds, for `tmcra-mcp memory` (docs/memory-commands.md), as
  // memory/engine.h describes them. A memory that offers them not answers kUnimplemented
  // (Unavailable), naming the call: TMCRA's hosted service exposes no deletion, export or
  // import, and nothing is changed.
  [[nodiscard]] virtual Result<json> ScopeStats() { return Unavailable("memory stats"); }
  [[nodiscard]] virtual Result<json> Forget(std::string_view scope, const json& body) {
    (void)scope, (void)body;
    return Unavailable("forget");
  }
  // Retention's size cap: the oldest records of every scope, until `bytes` of text are gone.
  [[nodiscard]] virtual Result<json> ForgetOldest(int64_t bytes) {
    (void)bytes;
    return Unavailable("retention");
  }
  // Gives freed space back and erases deleted text from the files (memory::Engine::Erase).
  [[nodiscard]] virtual Result<json> Erase() { return Unavailable("erase"); }
  [[nodiscard]] virtual Status Export(std::string_view scope,
                                      const std::function<Status(const json& line)>& sink) {
    (void)scope, (void)sink;
    return Unavailable("export");
  }
  [[nodiscard]] virtual Result<json> Import(std::string_view scope, const json& lines) {
    (void)scope, (void)lines;
    return Unavailable("import");
  }

  // Where this memory lives, for tmcra_status: {"mode", ...} without credentials.
  virtual json Describe() const = 0;
  // Figures for tmcra_status (records, scopes, pending jobs, file size), or an error when the
  // memory cannot be reached. Opens a lazily opened store.
  [[nodiscard]] virtual Result<json> Stats() = 0;
  // Whether the memory can serve (tmcra-memd's /readyz): its store answers a read, and a write
  // too while its last write failed for want of room (Errc::kStorageFull until one succeeds).
  // The default asks GetJob for a job that cannot exist: answered, or the service's not_found, is
  // ready.
  [[nodiscard]] virtual Status Ready() {
    auto probe = GetJob("job_readyz_probe");
    if (probe || (probe.error().code == Errc::kNotFound && IsServiceAnswer(probe.error()))) {
      return Ok();
    }
    return probe.error();
  }

 protected:
  // The answer of a memory without a maintenance call.
  static Error Unavailable(const std::string& call) {
    return Error::Api(Errc::kUnimplemented, "not_supported",
                      "this memory offers no " + call + "; nothing was changed");
  }
};

}  // namespace tmcra::api
