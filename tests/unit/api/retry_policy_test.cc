// The retry rules of docs/contract.md §1.2 (test row H3): the retry set, the backoff sequence,
// Retry-After parsing and clamping, and 10,000 random schedules whose every delay must lie in
// its bounds and whose attempts never exceed the budget.
#include "src/api/retry_policy.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "src/api/api_status.h"

using namespace std::chrono_literals;
using tmcra::api::AttemptKind;
using tmcra::api::AttemptOutcome;
using tmcra::api::Backoff;
using tmcra::api::IsRetryableStatus;
using tmcra::api::NextStep;
using tmcra::api::ParseRetryAfter;
using tmcra::api::RetryStep;
using Reason = tmcra::api::RetryStep::Reason;
using ms = std::chrono::milliseconds;

namespace {

AttemptOutcome Answered(int status, int expected, std::vector<std::string> retry_after = {}) {
  AttemptOutcome o;
  o.kind = AttemptKind::kAnswered;
  o.status = status;
  o.expected_status = expected;
  o.retry_after = std::move(retry_after);
  return o;
}

AttemptOutcome Failed(AttemptKind kind) {
  AttemptOutcome o;
  o.kind = kind;
  return o;
}

}  // namespace

TEST_CASE("the retry set is exactly 408 425 429 500 502 503 504", "[retry]") {
  const std::set<int> expected{408, 425, 429, 500, 502, 503, 504};
  for (int status = 100; status < 600; ++status) {
    INFO(status);
    CHECK(IsRetryableStatus(status) == (expected.count(status) == 1));
    // ErrorFromStatus decides `retryable` by the same set.
    CHECK(tmcra::api::ErrorFromStatus(status, "c", "m").retryable == IsRetryableStatus(status));
  }
}

TEST_CASE("backoff is 0.2 s doubled per attempt, capped at 2 s", "[retry]") {
  CHECK(Backoff(1) == 200ms);
  CHECK(Backoff(2) == 400ms);
  CHECK(Backoff(3) == 800ms);
  CHECK(Backoff(4) == 1600ms);
  CHECK(Backoff(5) == 2000ms);
  CHECK(Backoff(6) == 2000ms);
  CHECK(Backoff(1000000) == 2000ms);
  CHECK(Backoff(0) == 200ms);
  CHECK(Backoff(-5) == 200ms);
}

TEST_CASE("Retry-After: digits (and a decimal fraction) clamped to [0, 30] s, else absent",
          "[retry]") {
  const auto one = [](const std::string& v) { return ParseRetryAfter({v}); };
  CHECK(one("0") == ms(0));
  CHECK(one("5") == ms(5000));
  CHECK(one("30") == ms(30000));
  CHECK(one("31") == ms(30000));
  CHECK(one("1000000000") == ms(30000));
  CHECK(one("99999999999999999999") == ms(30000));  // 20 digits: clamped, no overflow
  CHECK(one(std::string(5000, '9')) == ms(30000));
  CHECK(one("2.5") == ms(2500));
  CHECK(one("0.25") == ms(250));
  CHECK(one("0.0001") == ms(0));
  CHECK(one("1.23456") == ms(1234));
  CHECK(one(" 5 ") == ms(5000));
  CHECK(one("\t7") == ms(7000));
  CHECK(one("007") == ms(7000));
  // Not understood: backoff instead.
  for (const std::string& v : std::vector<std::string>{"",
                                                       " ",
                                                       "-1",
                                                       "-0",
                                                       "+5",
                                                       "abc",
                                                       "1e9",
                                                       "1E3",
                                                       "inf",
                                                       "nan",
                                                       "Infinity",
                                                       "0x10",
                                                       "5s",
                                                       "5 s",
                                                       "5.",
                                                       ".5",
                                                       "5..0",
                                                       "1,5",
                                                       "1_000",
                                                       "\xef\xbc\x95" /* fullwidth 5 */,
                                                       "Wed, 21 Oct 2015 07:28:00 GMT",
                                                       "Fri, 31 Dec 2100 23:59:59 GMT",
                                                       "Thu, 99 Foo 2015 99:99:99 GMT",
                                                       "5\r\nX-Injected: 1"}) {
    INFO(v);
    CHECK_FALSE(one(v).has_value());
  }
  CHECK_FALSE(ParseRetryAfter({}).has_value());
  CHECK_FALSE(ParseRetryAfter({"5", "5"}).has_value());  // duplicates are ambiguous
  CHECK_FALSE(ParseRetryAfter({"5", "10"}).has_value());
}

TEST_CASE("the default schedule: 503 503 503 sleeps 0.2 s then 0.4 s, then gives up", "[retry]") {
  auto step = NextStep(Answered(503, 202), 1, 3, 0.5);
  CHECK(step.retry);
  CHECK(step.delay == 200ms);
  CHECK(step.reason == Reason::kBackoff);
  step = NextStep(Answered(503, 202), 2, 3, 0.5);
  CHECK(step.delay == 400ms);
  step = NextStep(Answered(503, 202), 3, 3, 0.5);
  CHECK_FALSE(step.retry);
  CHECK(step.reason == Reason::kExhausted);
}

TEST_CASE("what is final: the expected status, other statuses, fatal outcomes", "[retry]") {
  CHECK(NextStep(Answered(202, 202), 1, 3, 0).reason == Reason::kSuccess);
  // Another 2xx is not success (200 where 202 is expected), and not retried.
  for (int status : {200, 201, 204, 301, 302, 307, 308, 400, 401, 402, 403, 404, 409, 410, 411, 413,
                     422, 501, 505}) {
    INFO(status);
    const auto step = NextStep(Answered(status, 202), 1, 3, 0);
    CHECK_FALSE(step.retry);
    CHECK(step.reason == Reason::kNotRetryable);
  }
  // Even with a Retry-After, 401/403 are not retried.
  CHECK_FALSE(NextStep(Answered(401, 200, {"1"}), 1, 3, 0).retry);
  CHECK_FALSE(NextStep(Answered(403, 200, {"1"}), 1, 3, 0).retry);
  CHECK_FALSE(NextStep(Failed(AttemptKind::kFatal), 1, 3, 0.3).retry);
  // max_attempts 1: nothing is ever retried.
  CHECK_FALSE(NextStep(Answered(503, 200), 1, 1, 0).retry);
  CHECK_FALSE(NextStep(Failed(AttemptKind::kInDoubt), 1, 1, 0).retry);
}

TEST_CASE("Retry-After wins over backoff when it parses and 429 without it backs off", "[retry]") {
  auto step = NextStep(Answered(429, 200, {"5"}), 1, 3, 0);
  CHECK(step.retry);
  CHECK(step.delay == 5000ms);
  CHECK(step.reason == Reason::kRetryAfter);
  step = NextStep(Answered(503, 200, {"31"}), 1, 3, 0);
  CHECK(step.delay == 30000ms);
  step = NextStep(Answered(503, 200, {"0"}), 2, 3, 0);
  CHECK(step.delay == 0ms);
  CHECK(step.reason == Reason::kRetryAfter);
  step = NextStep(Answered(429, 200), 2, 3, 0);  // quota_exceeded carries no Retry-After
  CHECK(step.delay == 400ms);
  CHECK(step.reason == Reason::kBackoff);
  step = NextStep(Answered(503, 200, {"-1"}), 1, 3, 0);
  CHECK(step.delay == 200ms);
  CHECK(step.reason == Reason::kBackoff);
}

TEST_CASE("transport failures back off with 0 to 50 ms of jitter", "[retry]") {
  for (auto kind : {AttemptKind::kNotSent, AttemptKind::kInDoubt}) {
    CHECK(NextStep(Failed(kind), 1, 3, 0.0).delay == 200ms);
    CHECK(NextStep(Failed(kind), 1, 3, 0.999999).delay == 249ms);
    CHECK(NextStep(Failed(kind), 2, 3, 0.5).delay == 425ms);
    CHECK(NextStep(Failed(kind), 6, 9, 0.0).delay == 2000ms);
    // Out-of-range samples are clamped, never a negative or over-cap sleep.
    CHECK(NextStep(Failed(kind), 1, 3, -3.0).delay == 200ms);
    CHECK(NextStep(Failed(kind), 1, 3, 7.0).delay == 249ms);
    CHECK(NextStep(Failed(kind), 1, 3, std::nan("")).delay == 200ms);
    CHECK(NextStep(Failed(kind), 1, 3, 0.1).reason == Reason::kTransport);
  }
}

TEST_CASE("10,000 random schedules: every delay within its bounds, never over budget",
          "[retry][property]") {
  std::mt19937_64 rng(20261130);
  const std::vector<int> statuses{200, 201, 202, 204, 301, 308, 400, 401, 403, 404, 408,
                                  409, 410, 422, 425, 429, 500, 501, 502, 503, 504};
  const std::vector<std::vector<std::string>> retry_afters{{},
                                                           {"0"},
                                                           {"5"},
                                                           {"30"},
                                                           {"31"},
                                                           {"-1"},
                                                           {"abc"},
                                                           {"1e9"},
                                                           {"99999999999999999999"},
                                                           {"Wed, 21 Oct 2015 07:28:00 GMT"},
                                                           {"Fri, 31 Dec 2100 23:59:59 GMT"},
                                                           {"2.5"},
                                                           {"5", "5"}};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int retries = 0;
  for (int schedule = 0; schedule < 10000; ++schedule) {
    const int max_attempts = 1 + static_cast<int>(rng() % 10);
    const int expected = std::vector<int>{200, 201, 202}[rng() % 3];
    int attempts = 0;
    for (int attempt = 1;; ++attempt) {
      ++attempts;
      REQUIRE(attempts <= max_attempts);
      AttemptOutcome outcome;
      switch (rng() % 4) {
        case 0:
          outcome = Failed(AttemptKind::kNotSent);
          break;
        case 1:
          outcome = Failed(AttemptKind::kInDoubt);
          break;
        case 2:
          outcome = Failed(AttemptKind::kFatal);
          break;
        default:
          outcome = Answered(statuses[rng() % statuses.size()], expected,
                             retry_afters[rng() % retry_afters.size()]);
      }
      const double jitter = unit(rng);
      const RetryStep step = NextStep(outcome, attempt, max_attempts, jitter);
      REQUIRE(step.delay >= 0ms);
      REQUIRE(step.delay <= tmcra::api::kRetryAfterMax);
      if (!step.retry) {
        REQUIRE(step.delay == 0ms);
        const bool success = outcome.kind == AttemptKind::kAnswered && outcome.status == expected;
        REQUIRE((step.reason == Reason::kSuccess) == success);
        break;
      }
      ++retries;
      REQUIRE(attempt < max_attempts);
      switch (outcome.kind) {
        case AttemptKind::kNotSent:
        case AttemptKind::kInDoubt:
          REQUIRE(step.delay >= Backoff(attempt));
          REQUIRE(step.delay < Backoff(attempt) + tmcra::api::kTransportJitter);
          REQUIRE(step.delay <= 2049ms);
          break;
        case AttemptKind::kAnswered: {
          REQUIRE(IsRetryableStatus(outcome.status));
          REQUIRE(outcome.status != expected);
          const auto after = ParseRetryAfter(outcome.retry_after);
          if (after) {
            REQUIRE(step.delay == *after);
          } else {
            REQUIRE(step.delay == Backoff(attempt));
            REQUIRE(step.delay <= 2000ms);
          }
          break;
        }
        case AttemptKind::kFatal:
          FAIL("a fatal outcome was retried");
      }
    }
  }
  CHECK(retries > 1000);  // the generator really exercised the retry paths
}
