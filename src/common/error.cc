#include "src/common/error.h"

namespace tmcra {

std::string_view ErrcName(Errc code) {
  switch (code) {
    case Errc::kInvalidArgument: return "invalid_argument";
    case Errc::kNotFound: return "not_found";
    case Errc::kConflict: return "conflict";
    case Errc::kUnavailable: return "unavailable";
    case Errc::kTimeout: return "timeout";
    case Errc::kRateLimited: return "rate_limited";
    case Errc::kPermissionDenied: return "permission_denied";
    case Errc::kDataLoss: return "data_loss";
    case Errc::kProtocol: return "protocol";
    case Errc::kCancelled: return "cancelled";
    case Errc::kInternal: return "internal";
  }
  return "internal";
}

std::string Error::ToString() const {
  std::string out(ErrcName(code));
  out += ": ";
  out += message;
  return out;
}

}  // namespace tmcra
