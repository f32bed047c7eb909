// Error values that cross module boundaries.
//
// Every fallible operation returns Result<T> (see result.h). An Error carries a code, a
// `retryable` flag decided once where the failure is classified, and a message that is safe to
// log: no secrets and no full payloads.
#pragma once

#include <string>
#include <string_view>

namespace tmcra {

enum class Errc {
  kInvalidArgument,
  kNotFound,
  kConflict,
  kUnavailable,
  kTimeout,
  kRateLimited,
  kPermissionDenied,
  kDataLoss,
  kStorageFull,    // the store cannot write: its disk (or quota) is full; retryable
  kUnimplemented,  // the peer has no such operation (an endpoint it does not offer)
  kProtocol,
  kCancelled,
  kInternal,
};

std::string_view ErrcName(Errc code);

struct Error {
  Error() = default;
  Error(Errc c, bool r, std::string m) : code(c), retryable(r), message(std::move(m)) {}

  Errc code = Errc::kInternal;
  bool retryable = false;
  std::string message;
  // Memory API errors only: the service's error code (e.g. "validation_error",
  // "idempotency_conflict") and the error's `details` as JSON text (empty when none). The
  // engine sets them; the Memory API adapters carry them across a transport, and only the
  // HTTP adapters know which HTTP status each error kind travels as (src/api/api_status.h).
  std::string api_code;
  std::string details_json;

  static Error Invalid(std::string m) { return {Errc::kInvalidArgument, false, std::move(m)}; }
  static Error NotFound(std::string m) { return {Errc::kNotFound, false, std::move(m)}; }
  static Error Conflict(std::string m) { return {Errc::kConflict, false, std::move(m)}; }
  static Error Unavailable(std::string m) { return {Errc::kUnavailable, true, std::move(m)}; }
  static Error Timeout(std::string m) { return {Errc::kTimeout, true, std::move(m)}; }
  static Error Protocol(std::string m) { return {Errc::kProtocol, false, std::move(m)}; }
  static Error Cancelled(std::string m) { return {Errc::kCancelled, false, std::move(m)}; }
  static Error Internal(std::string m) { return {Errc::kInternal, false, std::move(m)}; }
  static Error StorageFull(std::string m) { return {Errc::kStorageFull, true, std::move(m)}; }

  // A Memory API error of kind `kind` (kInvalidArgument for a refused field, kConflict,
  // kNotFound, kPermissionDenied, kRateLimited, kUnavailable, kInternal…) with the service's
  // error code. Retryable for the kinds a client retries: kTimeout, kRateLimited, kUnavailable
  // and kInternal.
  static Error Api(Errc kind, std::string api_code, std::string message,
                   std::string details_json = {});

  // "<code>: <message>", for logs and tool error texts (the API code when there is one).
  std::string ToString() const;
};

}  // namespace tmcra
