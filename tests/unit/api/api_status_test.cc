// Error kinds and HTTP statuses meet only in src/api/api_status: each kind's own status maps
// back to the kind, a status of another kind keeps its number in the message, and the client's
// own transport codes are not service answers.
#include "src/api/api_status.h"

#include <catch2/catch.hpp>

#include "src/api/http_memory_api.h"
#include "src/api/retry_policy.h"

namespace {

using tmcra::Errc;
using tmcra::Error;
using namespace tmcra::api;

TEST_CASE("each kind's status maps back to the kind", "[api][status]") {
  for (Errc kind : {Errc::kInvalidArgument, Errc::kNotFound, Errc::kConflict,
                    Errc::kPermissionDenied, Errc::kRateLimited, Errc::kUnavailable, Errc::kTimeout,
                    Errc::kUnimplemented, Errc::kInternal}) {
    INFO(tmcra::ErrcName(kind));
    CHECK(KindForStatus(HttpStatusFor(kind)) == kind);
  }
  CHECK(HttpStatusFor(Errc::kInvalidArgument) == 422);
  CHECK(HttpStatusFor(Errc::kConflict) == 409);
  CHECK(HttpStatusFor(Errc::kStorageFull) == 503);
}

TEST_CASE("an answer's status decides kind and retry, and stays in the message", "[api][status]") {
  for (int status = 300; status < 600; ++status) {
    INFO(status);
    const Error e = ErrorFromStatus(status, "code", "refused");
    CHECK(e.code == KindForStatus(status));
    CHECK(e.retryable == IsRetryableStatus(status));
    CHECK(e.api_code == "code");
    const bool own = HttpStatusFor(e.code) == status;
    CHECK((e.message == "refused") == own);
    if (!own) CHECK(e.message == "refused (HTTP " + std::to_string(status) + ")");
  }
  // A message that names its status is left as it is.
  CHECK(ErrorFromStatus(401, "x", "TMCRA returned HTTP 401").message == "TMCRA returned HTTP 401");
}

TEST_CASE("the engine's errors are service answers, the client's own codes are not",
          "[api][status]") {
  CHECK(IsServiceAnswer(Error::Api(Errc::kConflict, "idempotency_conflict", "different body")));
  CHECK(IsServiceAnswer(ErrorFromStatus(404, "not_found", "job not found")));
  CHECK_FALSE(IsServiceAnswer(Error::Unavailable("reset")));
  for (std::string_view own : {kTransportNotSent, kTransportInDoubt, kTlsVerificationFailed,
                               kClientSetupError, kConnectionBlocked}) {
    Error e = Error::Unavailable("x");
    e.api_code = std::string(own);
    CHECK_FALSE(IsServiceAnswer(e));
  }
}

TEST_CASE("Error::Api is retryable for the kinds a client retries", "[api][status]") {
  CHECK(Error::Api(Errc::kUnavailable, "unavailable", "busy").retryable);
  CHECK(Error::Api(Errc::kRateLimited, "rate_limited", "slow down").retryable);
  CHECK(Error::Api(Errc::kInternal, "internal_error", "internal error").retryable);
  CHECK_FALSE(Error::Api(Errc::kInvalidArgument, "validation_error", "x").retryable);
  CHECK_FALSE(Error::Api(Errc::kConflict, "idempotency_conflict", "x").retryable);
  CHECK_FALSE(Error::Api(Errc::kNotFound, "not_found", "x").retryable);
}

}  // namespace
