#include "src/tools/outbox_sender.h"

#include "receipts/receipts.h"

namespace tmcra::tools {

Result<nlohmann::json> MemoryApiSender::Submit(const queue::Item& item) {
  const nlohmann::json body{{"session_id", item.session_id},
                            {"messages", item.messages},
                            {"consistency", item.consistency},
                            {"slow_policy", item.slow_policy},
                            {"metadata", item.metadata}};
  auto response = memory_.Ingest(item.scope_name, body, {item.idempotency_key, item.agent_id});
  if (!response) return response.error();
  return receipts::IngestReceipt(*response, item.scope_name);
}

Result<nlohmann::json> MemoryApiSender::PollJob(const std::string& job_id) {
  auto job = memory_.GetJob(job_id);
  if (!job) return job.error();
  return receipts::JobReceipt(*job);
}

}  // namespace tmcra::tools
