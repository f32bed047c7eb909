#include "memd/mcp_streams.h"

#include <utility>

#include "base/ids.h"

namespace tmcra::memd {

namespace {

std::string StreamId() {
  std::string id = UuidV4();
  std::string out;
  for (char c : id) {
    if (c != '-') out.push_back(c);
  }
  return out;
}

}  // namespace

std::string StreamStore::Open(const std::string& key_id) {
  std::string id = StreamId();
  std::lock_guard lock(mu_);
  ForgetOld(std::chrono::steady_clock::now());
  streams_[id] = Stream{key_id, std::nullopt, {}};
  return id;
}

void StreamStore::Finish(const std::string& stream, std::string message) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  it->second.message = std::move(message);
  it->second.finished = std::chrono::steady_clock::now();
  cv_.notify_all();
}

StreamStore::Found StreamStore::Wait(const std::string& stream, const std::string& key_id,
                                     std::chrono::steady_clock::time_point deadline,
                                     std::string* message) {
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = streams_.find(stream);
    if (it == streams_.end() || it->second.key_id != key_id) return Found::kUnknown;
    if (it->second.message) {
      *message = *it->second.message;
      return Found::kReady;
    }
    if (stopping_ || cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      it = streams_.find(stream);
      if (it != streams_.end() && it->second.message) continue;
      return it == streams_.end() ? Found::kUnknown : Found::kPending;
    }
  }
}

void StreamStore::WakeAll() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void StreamStore::ForgetOld(std::chrono::steady_clock::time_point now) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    const bool expired = it->second.message && now - it->second.finished > kStreamKeep;
    it = expired ? streams_.erase(it) : std::next(it);
  }
  if (streams_.size() < kMaxStreams) return;
  auto oldest = streams_.end();
  for (auto it = streams_.begin(); it != streams_.end(); ++it) {
    if (it->second.message &&
        (oldest == streams_.end() || it->second.finished < oldest->second.finished)) {
      oldest = it;
    }
  }
  if (oldest != streams_.end()) streams_.erase(oldest);
}

}  // namespace tmcra::memd
