#include "base/error.h"

namespace tmcra {

std::string_view ErrcName(Errc code) {
  switch (code) {
    case Errc::kInvalidArgument:
      return "invalid_argument";
    case Errc::kNotFound:
      return "not_found";
    case Errc::kConflict:
      return "conflict";
    case Errc::kUnavailable:
      return "unavailable";
    case Errc::kTimeout:
      return "timeout";
    case Errc::kRateLimited:
      return "rate_limited";
    case Errc::kPermissionDenied:
      return "permission_denied";
    case Errc::kDataLoss:
      return "data_loss";
    case Errc::kStorageFull:
      return "storage_full";
    case Errc::kProtocol:
      return "protocol";
    case Errc::kCancelled:
      return "cancelled";
    case Errc::kInternal:
      return "internal";
  }
  return "internal";
}

Error Error::Api(int status, std::string api_code, std::string message, std::string details_json) {
  Errc code = Errc::kInternal;
  switch (status) {
    case 400:
    case 411:
    case 413:
    case 422:
      code = Errc::kInvalidArgument;
      break;
    case 401:
    case 402:
    case 403:
      code = Errc::kPermissionDenied;
      break;
    case 404:
    case 410:
      code = Errc::kNotFound;
      break;
    case 408:
      code = Errc::kTimeout;
      break;
    case 409:
      code = Errc::kConflict;
      break;
    case 425:
    case 429:
      code = Errc::kRateLimited;
      break;
    case 502:
    case 503:
    case 504:
      code = Errc::kUnavailable;
      break;
    default:
      code = Errc::kInternal;
      break;
  }
  const bool retryable = status == 408 || status == 425 || status == 429 || status == 500 ||
                         status == 502 || status == 503 || status == 504;
  Error error{code, retryable, std::move(message)};
  error.http_status = status;
  error.api_code = std::move(api_code);
  error.details_json = std::move(details_json);
  return error;
}

std::string Error::ToString() const {
  std::string out(api_code.empty() ? std::string(ErrcName(code)) : api_code);
  out += ": ";
  out += message;
  return out;
}

}  // namespace tmcra
