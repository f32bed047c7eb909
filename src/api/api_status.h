// Memory API errors and HTTP statuses: the one place where an error kind (Errc) meets the
// status it travels as. Only the HTTP adapters (the HTTPS client, tmcra-memd) and the tools'
// error text use it; the engine and the common Error type know kinds and codes only.
//
// Kind -> status (what tmcra-memd answers and what a tool's error text shows):
//   kInvalidArgument 422, kNotFound 404, kConflict 409, kPermissionDenied 403,
//   kRateLimited 429, kUnavailable 503, kStorageFull 503, kTimeout 504, kUnimplemented 501,
//   kProtocol 502, everything else 500.
// Status -> kind (what the client makes of a service's answer):
//   400 411 413 422 -> kInvalidArgument; 401 402 403 -> kPermissionDenied; 404 410 ->
//   kNotFound; 405 501 -> kUnimplemented; 408 504 -> kTimeout; 409 -> kConflict;
//   425 429 -> kRateLimited; 502 503 -> kUnavailable; anything else -> kInternal.
// A received status that is not its kind's own status stays visible in the message (" (HTTP
// 401)" is added unless the message names it), so no answer loses its status on the way to a
// human.
#pragma once

#include <string>

#include "base/error.h"

namespace tmcra::api {

// The HTTP status an error of this kind travels as.
int HttpStatusFor(Errc kind);

// The kind of error an HTTP status means.
Errc KindForStatus(int status);

// The error for a service's answer with HTTP `status`: its kind from the status, retryable
// exactly for the statuses the client retries (retry_policy.h), the service's code and details.
Error ErrorFromStatus(int status, std::string api_code, std::string message,
                      std::string details_json = {});

// Whether `error` is an answer of a Memory API (the engine's or a service's), as opposed to a
// local failure or one of the HTTP client's own transport codes.
bool IsServiceAnswer(const Error& error);

}  // namespace tmcra::api
