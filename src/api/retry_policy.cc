#include "src/api/retry_policy.h"

#include <algorithm>
#include <cmath>

namespace tmcra::api {

bool IsRetryableStatus(int status) {
  switch (status) {
    case 408:
    case 425:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return true;
    default:
      return false;
  }
}

std::chrono::milliseconds Backoff(int attempt) {
  // 200 ms doubled per attempt: 200, 400, 800, 1600, then the 2 s cap (no overflow: the
  // doubling stops as soon as it passes the cap).
  auto delay = kBackoffBase;
  for (int i = 1; i < attempt && delay < kBackoffCap; ++i) delay *= 2;
  return std::min(delay, kBackoffCap);
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::vector<std::string>& values) {
  if (values.size() != 1) return std::nullopt;  // absent, or ambiguous duplicates
  const std::string_view text = TrimOws(values.front());
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() || !std::all_of(whole.begin(), whole.end(), IsDigit)) return std::nullopt;
  if (dot != std::string_view::npos &&
      (fraction.empty() || !std::all_of(fraction.begin(), fraction.end(), IsDigit))) {
    return std::nullopt;
  }
  // Whole seconds, saturating far above the clamp so any digit count is safe.
  int64_t seconds = 0;
  for (char c : whole) {
    seconds = std::min<int64_t>(seconds * 10 + (c - '0'), 1'000'000);
  }
  int64_t millis = seconds * 1000;
  // The first three fraction digits are milliseconds; further ones are below our resolution.
  int64_t scale = 100;
  for (size_t i = 0; i < fraction.size() && i < 3; ++i, scale /= 10) {
    millis += (fraction[i] - '0') * scale;
  }
  return std::clamp(std::chrono::milliseconds(millis), std::chrono::milliseconds(0),
                    kRetryAfterMax);
}

RetryStep NextStep(const AttemptOutcome& outcome, int attempt, int max_attempts,
                   double jitter_unit) {
  using Reason = RetryStep::Reason;
  const bool last = attempt >= max_attempts;
  switch (outcome.kind) {
    case AttemptKind::kFatal:
      return {false, std::chrono::milliseconds(0), Reason::kNotRetryable};
    case AttemptKind::kNotSent:
    case AttemptKind::kInDoubt: {
      if (last) return {false, std::chrono::milliseconds(0), Reason::kExhausted};
      if (!(jitter_unit >= 0.0)) jitter_unit = 0.0;  // also catches NaN
      if (jitter_unit >= 1.0) jitter_unit = std::nextafter(1.0, 0.0);
      const auto jitter = std::chrono::milliseconds(static_cast<int64_t>(
          std::floor(jitter_unit * static_cast<double>(kTransportJitter.count()))));
      return {true,
              Backoff(attempt) + std::min(jitter, kTransportJitter - std::chrono::milliseconds(1)),
              Reason::kTransport};
    }
    case AttemptKind::kAnswered:
      break;
  }
  if (outcome.status == outcome.expected_status) {
    return {false, std::chrono::milliseconds(0), Reason::kSuccess};
  }
  if (!IsRetryableStatus(outcome.status)) {
    return {false, std::chrono::milliseconds(0), Reason::kNotRetryable};
  }
  if (last) return {false, std::chrono::milliseconds(0), Reason::kExhausted};
  if (auto after = ParseRetryAfter(outcome.retry_after)) {
    return {true, *after, Reason::kRetryAfter};
  }
  return {true, Backoff(attempt), Reason::kBackoff};
}

std::string_view ReasonName(RetryStep::Reason reason) {
  switch (reason) {
    case RetryStep::Reason::kSuccess:
      return "success";
    case RetryStep::Reason::kTransport:
      return "transport failure";
    case RetryStep::Reason::kRetryAfter:
      return "Retry-After";
    case RetryStep::Reason::kBackoff:
      return "backoff";
    case RetryStep::Reason::kExhausted:
      return "attempts exhausted";
    case RetryStep::Reason::kNotRetryable:
      return "not retryable";
  }
  return "unknown";
}

}  // namespace tmcra::api
