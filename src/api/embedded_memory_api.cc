#include "src/api/embedded_memory_api.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

namespace tmcra::api {

namespace {

// Busy waits beyond SQLite's own timeout: a few more tries with growing pauses.
template <class Fn>
auto WithLockRetries(Fn&& fn) -> decltype(fn()) {
  for (int attempt = 1;; ++attempt) {
    auto result = fn();
    if (result || attempt >= 4 || result.error().code != Errc::kUnavailable ||
        !result.error().api_code.empty()) {
      return result;
    }
    spdlog::debug("memory store busy, retrying ({})", result.error().message);
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * attempt * attempt));
  }
}

}  // namespace

EmbeddedMemoryApi::EmbeddedMemoryApi(memory::EngineOptions options)
    : options_(std::move(options)) {}

EmbeddedMemoryApi::~EmbeddedMemoryApi() = default;

Result<memory::Engine*> EmbeddedMemoryApi::Engine() {
  std::lock_guard lock(open_mu_);
  if (engine_) return engine_.get();
  auto opened = memory::Engine::Open(options_);
  if (!opened) {
    spdlog::error("cannot open the memory store {}: {}", options_.path, opened.error().message);
    return opened.error();
  }
  engine_ = std::move(*opened);
  spdlog::info("memory store open: {}", options_.path);
  return engine_.get();
}

Result<json> EmbeddedMemoryApi::Recall(std::string_view scope, const json& body,
                                       const RecallOptions& options) {
  auto engine = Engine();
  if (!engine) return engine.error();
  if (options.structured_evidence_unused && body.is_object() &&
      !body.contains("response_projection")) {
    // The engine keeps the snapshot under prompt_only (kFeaturePromptOnlySnapshot) and builds
    // no windows for an answer that would drop them.
    const json lighter = PromptOnlyBody(body);
    return WithLockRetries([&] { return (*engine)->Recall(scope, lighter); });
  }
  return WithLockRetries([&] { return (*engine)->Recall(scope, body); });
}

Result<json> EmbeddedMemoryApi::Ingest(std::string_view scope, const json& body,
                                       const IngestOptions& options) {
  auto engine = Engine();
  if (!engine) return engine.error();
  memory::IngestContext context;
  context.idempotency_key = options.idempotency_key;
  context.agent_id = options.agent_id;
  if (options.client_platform) context.client_platform = *options.client_platform;
  context.integration_id = options.integration_id;
  return WithLockRetries([&] { return (*engine)->Ingest(scope, body, context); });
}

Result<json> EmbeddedMemoryApi::IngestBatch(std::string_view scope, const json& body,
                                            const IngestOptions& options) {
  auto engine = Engine();
  if (!engine) return engine.error();
  memory::IngestContext context;  // each item carries its own key
  context.agent_id = options.agent_id;
  if (options.client_platform) context.client_platform = *options.client_platform;
  context.integration_id = options.integration_id;
  // A retry after a lock wait is safe: the batch rolled back whole, and every item is
  // idempotent by its key.
  return WithLockRetries([&] { return (*engine)->IngestBatch(scope, body, context); });
}

Result<json> EmbeddedMemoryApi::GetJob(std::string_view job_id) {
  auto engine = Engine();
  if (!engine) return engine.error();
  return WithLockRetries([&] { return (*engine)->GetJob(job_id); });
}

Result<json> EmbeddedMemoryApi::Evidence(std::string_view scope, std::string_view memory_id,
                                         int limit) {
  auto engine = Engine();
  if (!engine) return engine.error();
  return WithLockRetries([&] { return (*engine)->Evidence(scope, memory_id, limit); });
}

Result<json> EmbeddedMemoryApi::Feedback(std::string_view scope, const json& body,
                                         const FeedbackOptions& options) {
  auto engine = Engine();
  if (!engine) return engine.error();
  // A retry after a lock wait is safe: the feedback is idempotent by its key, and a write that
  // failed rolled back whole.
  return WithLockRetries([&] { return (*engine)->Feedback(scope, body, options.idempotency_key); });
}

Result<json> EmbeddedMemoryApi::ScopeStats() {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  return WithLockRetries([&] { return engine->ScopeStats(); });
}

Result<json> EmbeddedMemoryApi::Forget(std::string_view scope, const json& body) {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  // A retry after a lock wait is safe: the deletion rolled back whole.
  return WithLockRetries([&] { return engine->Forget(scope, body); });
}

Result<json> EmbeddedMemoryApi::ForgetOldest(int64_t bytes) {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  return WithLockRetries([&] { return engine->ForgetOldest(bytes); });
}

Result<json> EmbeddedMemoryApi::Erase() {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  return WithLockRetries([&] { return engine->Erase(); });
}

Status EmbeddedMemoryApi::Export(std::string_view scope,
                                 const std::function<Status(const json& line)>& sink) {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  return engine->Export(scope, sink);
}

Result<json> EmbeddedMemoryApi::Import(std::string_view scope, const json& lines) {
  TMCRA_ASSIGN_OR_RETURN(memory::Engine * engine, Engine());
  // A retry after a lock wait is safe: the import rolled back whole, and is idempotent.
  return WithLockRetries([&] { return engine->Import(scope, lines); });
}

json EmbeddedMemoryApi::Describe() const {
  return json{{"mode", "embedded"}, {"database_path", options_.path}};
}

Result<json> EmbeddedMemoryApi::Stats() {
  auto engine = Engine();
  if (!engine) return engine.error();
  auto stats = WithLockRetries([&] { return (*engine)->Stats(); });
  if (!stats) return stats.error();
  return stats->ToJson();
}

Status EmbeddedMemoryApi::Ready() {
  auto engine = Engine();
  if (!engine) return engine.error();
  return WithLockRetries([&] { return (*engine)->Ready(); });
}

}  // namespace tmcra::api
