#include "memd/mcp_streams.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/ids.h"
#include "memd/http_message.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;
constexpr const char* kKind = "stream";

std::string StreamId() {
  std::string out;
  for (char c : UuidV4()) {
    if (c != '-') out.push_back(c);
  }
  return out;
}

double Seconds(std::chrono::minutes m) { return static_cast<double>(m.count()) * 60; }

}  // namespace

Result<std::string> StreamStore::Open(const std::string& key_id) {
  (void)keys_.DropExpiredRecords();
  std::string id = StreamId();
  TMCRA_RETURN_IF_ERROR(keys_.PutRecord(
      {kKind, id, json{{"key_id", key_id}}.dump(), id, NowSeconds() + Seconds(kOpenStreamKeep)}));
  return id;
}

void StreamStore::Finish(const std::string& stream, const std::string& key_id,
                         const std::string& message) {
  const json data{{"key_id", key_id}, {"message", message}};
  if (auto s = keys_.PutRecord(
          {kKind, stream, data.dump(), stream, NowSeconds() + Seconds(kStreamKeep)});
      !s) {
    spdlog::error("mcp: the answer of stream {} could not be kept: {}", stream,
                  LogSafe(s.error().ToString(), 1000));
  }
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

StreamStore::Found StreamStore::Look(const std::string& stream, const std::string& key_id,
                                     std::string* message) {
  auto record = keys_.GetRecord(kKind, stream);
  if (!record) return Found::kPending;  // the store cannot be read now: the client asks again
  if (!*record) return Found::kUnknown;
  const json data = json::parse((*record)->data, nullptr, false);
  if (!data.is_object() || data.value("key_id", json()) != key_id) return Found::kUnknown;
  auto m = data.find("message");
  if (m == data.end() || !m->is_string()) return Found::kPending;
  *message = m->get<std::string>();
  return Found::kReady;
}

StreamStore::Found StreamStore::Wait(const std::string& stream, const std::string& key_id,
                                     std::chrono::steady_clock::time_point deadline,
                                     std::string* message) {
  for (;;) {
    const Found found = Look(stream, key_id, message);
    const auto now = std::chrono::steady_clock::now();
    if (found != Found::kPending || now >= deadline) return found;
    std::unique_lock lock(mu_);
    if (stopping_) return found;
    cv_.wait_until(lock, std::min(deadline, now + kPollInterval));
  }
}

void StreamStore::WakeAll() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

}  // namespace tmcra::memd
