// Retention: how old and how large the embedded memory may grow (docs/memory-commands.md,
// "retention"). The policy lives in <data_dir>/retention.json (0600); `tmcra-mcp memory
// retention` writes it, and a running tmcra-mcp applies it in the background at start and every
// ten minutes: records older than the age, then the oldest records while the data directory is
// over the size, never an outbox item still waiting for delivery. Each pass is logged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "base/result.h"
#include "queue/outbox.h"
#include "src/api/memory_api.h"

namespace tmcra::app {

struct RetentionPolicy {
  std::optional<int64_t> max_age_seconds;
  std::optional<int64_t> max_bytes;  // of the data directory on disk
  bool empty() const { return !max_age_seconds && !max_bytes; }
  nlohmann::json ToJson() const;
};

// "30d", "12h", "2w", "90m" (minutes) or plain seconds; kInvalidArgument naming `what`.
Result<int64_t> ParseDuration(const std::string& text, const std::string& what);
// "500M", "2G", "64K" (powers of 1024) or plain bytes; at least 64 KiB.
Result<int64_t> ParseByteSize(const std::string& text, const std::string& what);

// The policy in `data_dir` (empty when there is none); an unreadable or invalid file is an error.
Result<RetentionPolicy> LoadRetention(const std::string& data_dir);
// Writes the policy (0600 in the 0700 data directory); an empty policy removes the file.
Status SaveRetention(const std::string& data_dir, const RetentionPolicy& policy);

// The bytes on disk of every file under `dir`.
int64_t DirectoryBytes(const std::string& dir);

// One pass of the policy: {"aged_records", "aged_outbox_rows", "size_records",
// "bytes_before", "bytes_after"}. `outbox` may be null.
Result<nlohmann::json> ApplyRetention(const RetentionPolicy& policy, api::MemoryApi& memory,
                                      queue::Outbox* outbox, const std::string& data_dir);

// Applies the policy of `data_dir` now and every `period` until destroyed.
class RetentionWorker {
 public:
  using OutboxGetter = std::function<queue::Outbox*()>;
  RetentionWorker(api::MemoryApi& memory, OutboxGetter outbox, std::string data_dir,
                  std::chrono::seconds period);
  ~RetentionWorker();
  RetentionWorker(const RetentionWorker&) = delete;
  RetentionWorker& operator=(const RetentionWorker&) = delete;

 private:
  void Loop();
  api::MemoryApi& memory_;
  OutboxGetter outbox_;
  std::string data_dir_;
  std::chrono::seconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tmcra::app
