#include "src/tools/outbox_sender.h"

#include <algorithm>
#include <cstddef>

#include "receipts/receipts.h"

namespace tmcra::tools {

namespace {

// The ingest request of an item, as sent alone (its key goes in the Idempotency-Key header).
nlohmann::json IngestBody(const queue::Item& item) {
  return nlohmann::json{{"session_id", item.session_id},
                        {"messages", item.messages},
                        {"consistency", item.consistency},
                        {"slow_policy", item.slow_policy},
                        {"metadata", item.metadata}};
}

// A job as the memory answered for `job_id`, as a job receipt: refused (a protocol error) when
// it is not a valid job or not that job.
Result<nlohmann::json> JobAnswer(const nlohmann::json& job, const std::string& job_id) {
  auto receipt = receipts::JobReceipt(job);
  if (!receipt) return receipt.error();
  if ((*receipt)["job_id"] != job_id) {
    return Error::Protocol("job: the memory answered for another job than " + job_id);
  }
  return receipt;
}

}  // namespace

Result<nlohmann::json> MemoryApiSender::Submit(const queue::Item& item) {
  auto response =
      memory_.Ingest(item.scope_name, IngestBody(item), {item.idempotency_key, item.agent_id});
  if (!response) return response.error();
  return receipts::IngestReceipt(*response, item.scope_name);
}

Result<std::vector<Result<nlohmann::json>>> MemoryApiSender::SubmitBatch(
    const std::vector<queue::Item>& items) {
  if (items.empty()) return std::vector<Result<nlohmann::json>>{};
  const std::string& scope = items.front().scope_name;
  const std::optional<std::string>& agent_id = items.front().agent_id;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& item : items) {
    if (item.scope_name != scope || item.agent_id != agent_id) {
      return Error::Invalid("a batch holds items of one scope and one agent id");
    }
    // The same request as Submit sends, so the memory hashes it the same way: a batch item
    // resubmitted alone later (or the other way round) is a replay, never a conflict.
    nlohmann::json request = IngestBody(item);
    request["idempotency_key"] = item.idempotency_key;
    list.push_back(std::move(request));
  }
  // A memory without the batch endpoint (TMCRA's hosted service) answers a non-retryable
  // error (the HTTP client remembers it for a while and sends no request), so the delivery
  // sends these items one by one.
  auto response = memory_.IngestBatch(scope, {{"items", std::move(list)}}, {"", agent_id});
  if (!response) return response.error();
  if (!response->is_object() || !response->contains("jobs") || !(*response)["jobs"].is_array() ||
      (*response)["jobs"].size() != items.size()) {
    return Error::Protocol("ingest batch: the answer does not hold one job per item");
  }
  const nlohmann::json& jobs = (*response)["jobs"];
  if (response->contains("scope_name") && (*response)["scope_name"] != scope) {
    return Error::Protocol("ingest batch: the answer names another scope");
  }
  std::vector<Result<nlohmann::json>> out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) out.push_back(receipts::IngestReceipt(jobs[i], scope));
  return out;
}

Result<nlohmann::json> MemoryApiSender::PollJob(const std::string& job_id) {
  auto job = memory_.GetJob(job_id);
  if (!job) return job.error();
  return JobAnswer(*job, job_id);
}

std::vector<Result<nlohmann::json>> MemoryApiSender::PollJobs(
    const std::vector<std::string>& job_ids) {
  std::vector<Result<nlohmann::json>> out;
  out.reserve(job_ids.size());
  for (size_t start = 0; start < job_ids.size(); start += api::kMaxJobsPerBatch) {
    const size_t end = std::min(job_ids.size(), start + api::kMaxJobsPerBatch);
    const std::vector<std::string> ids(job_ids.begin() + static_cast<std::ptrdiff_t>(start),
                                       job_ids.begin() + static_cast<std::ptrdiff_t>(end));
    auto jobs = memory_.GetJobs(ids);
    if (jobs && jobs->size() == ids.size()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        const Result<nlohmann::json>& job = (*jobs)[i];
        out.push_back(job ? JobAnswer(*job, ids[i]) : Result<nlohmann::json>(job.error()));
      }
    } else if (!jobs && jobs.error().retryable) {
      for (size_t i = 0; i < ids.size(); ++i) out.push_back(jobs.error());
    } else {
      for (const auto& id : ids) out.push_back(PollJob(id));
    }
  }
  return out;
}

}  // namespace tmcra::tools
