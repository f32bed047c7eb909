// The answers of /mcp tool calls that outlast their POST (memd/mcp_endpoint.h): each such call
// gets a stream, which the POST's answer names in its one SSE event; the call's answer is kept
// when it is ready, and a GET with Last-Event-ID takes it, as often as the client asks, until
// kStreamKeep after it was ready. A stream is bound to the key that opened it: another key's GET
// finds nothing.
//
// Kept in the key store as server records (KeyStore::PutRecord), so a client resumes through
// any memd on the same store (one data directory, or one PostgreSQL database), and after a
// restart. A wait in the memd that runs the call is woken at once; another memd looks again every
// kPollInterval. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "base/result.h"
#include "memd/key_store.h"

namespace tmcra::memd {

inline constexpr std::chrono::minutes kStreamKeep{10};
// How long a stream whose call still runs is kept (a call waits 15 minutes at most).
inline constexpr std::chrono::minutes kOpenStreamKeep{60};
inline constexpr std::chrono::milliseconds kPollInterval{200};

class StreamStore {
 public:
  explicit StreamStore(KeyStore& keys) : keys_(keys) {}

  // A new stream for a call of `key_id`: its id (32 hex digits). An error when the store cannot
  // write.
  [[nodiscard]] Result<std::string> Open(const std::string& key_id);
  // The call's answer (a serialized JSON-RPC message); wakes the GETs that wait for it.
  void Finish(const std::string& stream, const std::string& key_id, const std::string& message);

  enum class Found { kReady, kPending, kUnknown };
  // Waits until `deadline` for the answer of `stream`: kReady with `*message` set, kPending when
  // the call still runs at the deadline (or the store cannot be read), kUnknown for a stream this
  // key did not open (or one forgotten).
  Found Wait(const std::string& stream, const std::string& key_id,
             std::chrono::steady_clock::time_point deadline, std::string* message);
  // Wakes every waiter (the server is stopping): they answer what they have.
  void WakeAll();

 private:
  // One look at the store.
  Found Look(const std::string& stream, const std::string& key_id, std::string* message);

  KeyStore& keys_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace tmcra::memd
