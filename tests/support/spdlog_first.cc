// Linked into every test binary: constructs spdlog's registry (its default logger) before main,
// on the main thread. spdlog is a Debian library built without ThreadSanitizer, so when a
// test's first log line came from a thread it started, TSan (the tsan preset) could not see the
// lazy construction's synchronisation and reported the next thread's read of the logger as a
// race. tmcra-mcp and tmcra-memd log from main before they start a thread.
#include <spdlog/spdlog.h>

namespace {

[[maybe_unused]] const bool kSpdlogReady = spdlog::default_logger_raw() != nullptr;

}  // namespace
