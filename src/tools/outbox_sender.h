// The outbox's Sender over a MemoryApi: submits an item's ingest with its stored key and
// validates every answer as a receipt, so an invalid answer fails only its own item.
#pragma once

#include "queue/delivery.h"
#include "src/api/memory_api.h"

namespace tmcra::tools {

class MemoryApiSender final : public queue::Sender {
 public:
  explicit MemoryApiSender(api::MemoryApi& memory) : memory_(memory) {}
  Result<nlohmann::json> Submit(const queue::Item& item) override;
  Result<nlohmann::json> PollJob(const std::string& job_id) override;

 private:
  api::MemoryApi& memory_;
};

}  // namespace tmcra::tools
