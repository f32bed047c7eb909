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
    case Errc::kUnimplemented:
      return "unimplemented";
    case Errc::kProtocol:
      return "protocol";
    case Errc::kCancelled:
      return "cancelled";
    case Errc::kInternal:
      return "internal";
  }
  return "internal";
}

Error Error::Api(Errc kind, std::string api_code, std::string message, std::string details_json) {
  const bool retryable = kind == Errc::kTimeout || kind == Errc::kRateLimited ||
                         kind == Errc::kUnavailable || kind == Errc::kInternal;
  Error error{kind, retryable, std::move(message)};
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
