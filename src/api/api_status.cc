#include "src/api/api_status.h"

#include <string_view>

#include "src/api/http_memory_api.h"
#include "src/api/retry_policy.h"

namespace tmcra::api {

int HttpStatusFor(Errc kind) {
  switch (kind) {
    case Errc::kInvalidArgument:
      return 422;
    case Errc::kNotFound:
      return 404;
    case Errc::kConflict:
      return 409;
    case Errc::kPermissionDenied:
      return 403;
    case Errc::kRateLimited:
      return 429;
    case Errc::kUnavailable:
    case Errc::kStorageFull:
      return 503;
    case Errc::kTimeout:
      return 504;
    case Errc::kUnimplemented:
      return 501;
    case Errc::kProtocol:
      return 502;
    case Errc::kDataLoss:
    case Errc::kCancelled:
    case Errc::kInternal:
      return 500;
  }
  return 500;
}

Errc KindForStatus(int status) {
  switch (status) {
    case 400:
    case 411:
    case 413:
    case 422:
      return Errc::kInvalidArgument;
    case 401:
    case 402:
    case 403:
      return Errc::kPermissionDenied;
    case 404:
    case 410:
      return Errc::kNotFound;
    case 405:
    case 501:
      return Errc::kUnimplemented;
    case 408:
    case 504:
      return Errc::kTimeout;
    case 409:
      return Errc::kConflict;
    case 425:
    case 429:
      return Errc::kRateLimited;
    case 502:
    case 503:
      return Errc::kUnavailable;
    default:
      return Errc::kInternal;
  }
}

Error ErrorFromStatus(int status, std::string api_code, std::string message,
                      std::string details_json) {
  const Errc kind = KindForStatus(status);
  const std::string mark = "HTTP " + std::to_string(status);
  if (HttpStatusFor(kind) != status && message.find(mark) == std::string::npos) {
    message += " (" + mark + ")";
  }
  Error error{kind, IsRetryableStatus(status), std::move(message)};
  error.api_code = std::move(api_code);
  error.details_json = std::move(details_json);
  return error;
}

bool IsServiceAnswer(const Error& error) {
  if (error.api_code.empty()) return false;
  for (std::string_view own : {kTransportNotSent, kTransportInDoubt, kTlsVerificationFailed,
                               kClientSetupError, kConnectionBlocked}) {
    if (error.api_code == own) return false;
  }
  return true;
}

}  // namespace tmcra::api
