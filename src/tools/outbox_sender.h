// The outbox's Sender over a MemoryApi: submits an item's ingest with its stored key and
// validates every answer as a receipt, so an invalid answer fails only its own item. Batches go
// to MemoryApi::IngestBatch, each item under its own key; each job of the answer is validated
// as that item's receipt, exactly as a single submission's answer would be. Job polls of a
// delivery round go to MemoryApi::GetJobs the same way.
#pragma once

#include "queue/delivery.h"
#include "src/api/memory_api.h"

namespace tmcra::tools {

class MemoryApiSender final : public queue::Sender {
 public:
  explicit MemoryApiSender(api::MemoryApi& memory) : memory_(memory) {}
  Result<nlohmann::json> Submit(const queue::Item& item) override;
  // Items of one scope and agent id (the caller groups them). An answer whose shape does not
  // match the items is a non-retryable error for the whole batch, never a guess per item.
  Result<std::vector<Result<nlohmann::json>>> SubmitBatch(
      const std::vector<queue::Item>& items) override;
  Result<nlohmann::json> PollJob(const std::string& job_id) override;
  // MemoryApi::GetJobs, each job validated as PollJob validates it. Asked of a memory without
  // the batch endpoint, or answered with a non-retryable error for the whole call (an answer
  // that does not match the ids among them), the jobs are polled one by one instead; a
  // retryable error for the whole call is every job's result (nothing was learnt of any).
  std::vector<Result<nlohmann::json>> PollJobs(const std::vector<std::string>& job_ids) override;

 private:
  api::MemoryApi& memory_;
};

}  // namespace tmcra::tools
