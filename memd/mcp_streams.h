// The answers of /mcp tool calls that outlast their POST (memd/mcp_endpoint.h): each such call
// gets a stream, which the POST's answer names in its one SSE event; the call's answer is kept
// here when it is ready, and a GET with Last-Event-ID takes it, as often as the client asks,
// until kStreamKeep after it was ready. A stream is bound to the key that opened it: another
// key's GET finds nothing.
//
// In memory, in this process: a client resumes through the memd that ran the call (one memd, or
// a proxy that keeps a client on one instance). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace tmcra::memd {

inline constexpr std::chrono::minutes kStreamKeep{10};
// Streams kept at most; past it the oldest finished one is dropped.
inline constexpr size_t kMaxStreams = 10000;

class StreamStore {
 public:
  // A new stream for a call of `key_id`: its id (32 hex digits).
  std::string Open(const std::string& key_id);
  // The call's answer (a serialized JSON-RPC message); wakes the GETs that wait for it.
  void Finish(const std::string& stream, std::string message);

  enum class Found { kReady, kPending, kUnknown };
  // Waits until `deadline` for the answer of `stream`: kReady with `*message` set, kPending when
  // the call still runs at the deadline, kUnknown for a stream this key did not open (or one
  // forgotten).
  Found Wait(const std::string& stream, const std::string& key_id,
             std::chrono::steady_clock::time_point deadline, std::string* message);
  // Wakes every waiter (the server is stopping): they answer what they have.
  void WakeAll();

 private:
  struct Stream {
    std::string key_id;
    std::optional<std::string> message;
    std::chrono::steady_clock::time_point finished{};
  };
  void ForgetOld(std::chrono::steady_clock::time_point now);  // REQUIRES: mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Stream> streams_;  // guarded by mu_
  bool stopping_ = false;                  // guarded by mu_
};

}  // namespace tmcra::memd
