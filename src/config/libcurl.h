#pragma once

// libcurl is loaded at run time (dlopen), and only by the code that talks to a remote memory:
// the base-URL check (url.cc) and the HTTP client (src/api/http_memory_api.cc). With embedded
// memory tmcra-mcp never loads it, nor the ~30 libraries it pulls in (GnuTLS, Kerberos, LDAP,
// SSH, RTMP...): a hook is a new process on every event, so its start-up is its cost. The
// package still depends on libcurl (docs/configuration.md, "libcurl"); the headers come from
// find_package(CURL) at build time. No curl type appears here: each adapter .cc resolves the
// few functions it calls into a table of its own with ResolveLibcurl.

#include "base/result.h"

namespace tmcra::config {

// The soname loaded: libcurl's ABI 4 (every libcurl since 7.16).
inline constexpr const char* kLibcurlSoname = "libcurl.so.4";

// Loads libcurl once per process (later calls return the first outcome). The error, a
// configuration error (kInvalidArgument, not retryable), names libcurl and the package that
// provides it, with the loader's reason.
[[nodiscard]] Status LoadLibcurl();

// The address of libcurl's function `name`; loads libcurl first. An error names the function.
[[nodiscard]] Result<void*> LibcurlSymbol(const char* name);

// Sets `fn` to libcurl's function `name` (fn's type is the function's, from curl.h).
template <class Fn>
[[nodiscard]] Status ResolveLibcurl(Fn*& fn, const char* name) {
  auto symbol = LibcurlSymbol(name);
  if (!symbol) return symbol.error();
  fn = reinterpret_cast<Fn*>(*symbol);
  return Ok();
}

}  // namespace tmcra::config
