#include "src/config/libcurl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace tmcra::config {

namespace {

struct Loaded {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded (empty when loaded)
};

const Loaded& Library() {
  static const Loaded loaded = [] {
    Loaded out;
    const char* name = kLibcurlSoname;
#ifdef TMCRA_ENABLE_FAILPOINTS
    // Test builds only: tests name a library that does not exist, to check the error.
    if (const char* test_name = std::getenv("TMCRA_TEST_LIBCURL_SONAME");
        test_name != nullptr && *test_name != '\0') {
      name = test_name;
    }
#endif
    // Never unloaded: libcurl registers atexit-like cleanups through OpenSSL.
    out.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (out.handle == nullptr) {
      const char* reason = dlerror();
      out.error = std::string("remote memory needs libcurl (") + name +
                  ", Debian/Ubuntu package libcurl4, Fedora libcurl), which cannot be loaded: " +
                  (reason != nullptr ? reason : "unknown reason") +
                  ". Install libcurl, or use embedded memory (no TMCRA_API_KEY, no local "
                  "identity)";
    }
    return out;
  }();
  return loaded;
}

}  // namespace

Status LoadLibcurl() {
  const Loaded& loaded = Library();
  if (loaded.handle == nullptr) return Error::Invalid(loaded.error);
  return Ok();
}

Result<void*> LibcurlSymbol(const char* name) {
  if (auto s = LoadLibcurl(); !s) return s.error();
  void* symbol = dlsym(Library().handle, name);
  if (symbol == nullptr) {
    return Error::Invalid(std::string("the libcurl loaded (") + kLibcurlSoname +
                          ") has no function " + name + ": libcurl 7.85 or newer is needed");
  }
  return symbol;
}

}  // namespace tmcra::config
