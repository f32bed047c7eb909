// The retry decisions of the Memory API client (docs/contract.md §1.2), as pure functions so
// they can be tested exhaustively without a network. HttpMemoryApi feeds them what one attempt
// produced and sleeps for the delay they return.
//
//   - Statuses {408, 425, 429, 500, 502, 503, 504} are retried when they are not the expected
//     one; every other unexpected status (any 3xx, 401, 403, even another 2xx) is final.
//   - After a status: Retry-After if it parses (see ParseRetryAfter), else
//     min(2 s, 0.2 s * 2^(attempt-1)), no jitter.
//   - After a transport failure (not sent, or outcome unknown):
//     min(2 s, 0.2 s * 2^(attempt-1)) + uniform[0, 50 ms) jitter.
//   - kFatal outcomes (TLS verification, a local setup problem, an oversize answer) are never
//     repeated; neither is anything once `max_attempts` attempts were made.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmcra::api {

inline constexpr int kDefaultMaxAttempts = 3;
inline constexpr std::chrono::milliseconds kBackoffBase{200};
inline constexpr std::chrono::milliseconds kBackoffCap{2000};
inline constexpr std::chrono::milliseconds kTransportJitter{50};  // upper bound, exclusive
inline constexpr std::chrono::milliseconds kRetryAfterMax{30000};

// The statuses the client retries (and for which Error::Api sets `retryable`).
bool IsRetryableStatus(int status);

// min(2 s, 0.2 s * 2^(attempt-1)) for a 1-based attempt (attempt < 1 counts as 1).
std::chrono::milliseconds Backoff(int attempt);

// The delay a response's Retry-After headers ask for, given every value received (in order).
// Understood: exactly one value made of ASCII digits with an optional fraction ("5", "2.5"),
// optional surrounding spaces or tabs; it is clamped to [0, 30 s] (so "31" and a 20-digit
// value give 30 s). Anything else counts as absent, and the caller backs off instead: no
// header, two or more headers (even equal ones), an HTTP-date, a sign ("-1", "+5"), an
// exponent ("1e9"), "inf"/"nan", an empty value or any other text.
std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::vector<std::string>& values);

// How one attempt ended, as far as retrying is concerned.
enum class AttemptKind {
  kAnswered,  // a complete HTTP answer with a status
  kNotSent,   // a transport failure before the request left: DNS, connect, TLS handshake
  kInDoubt,   // a transport failure after the request may have been received
  kFatal,     // not worth repeating: TLS verification, local setup, an oversize answer
};

struct AttemptOutcome {
  AttemptKind kind = AttemptKind::kAnswered;
  int status = 0;                        // kAnswered: the HTTP status
  int expected_status = 0;               // kAnswered: the status the endpoint answers on success
  std::vector<std::string> retry_after;  // kAnswered: every Retry-After value, in order
};

struct RetryStep {
  enum class Reason {
    kSuccess,       // the expected status: done
    kTransport,     // retry after a transport failure (backoff + jitter)
    kRetryAfter,    // retry after the server's Retry-After
    kBackoff,       // retry after a retryable status without a usable Retry-After
    kExhausted,     // retryable, but this was the last attempt
    kNotRetryable,  // final: an unexpected status outside the retry set, or a fatal failure
  };
  bool retry = false;
  std::chrono::milliseconds delay{0};
  Reason reason = Reason::kSuccess;
};

// What to do after attempt `attempt` (1-based) of at most `max_attempts`. `jitter_unit` is a
// uniform sample in [0, 1), used only after transport failures (values outside are clamped).
RetryStep NextStep(const AttemptOutcome& outcome, int attempt, int max_attempts,
                   double jitter_unit);

std::string_view ReasonName(RetryStep::Reason reason);

}  // namespace tmcra::api
