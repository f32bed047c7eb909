// Named failpoints for crash tests: TMCRA_FAILPOINT("commit.after_insert") kills the process
// with SIGKILL when the environment variable TMCRA_FAILPOINTS names that point.
//
//   TMCRA_FAILPOINTS=commit.after_insert          die the first time the point is reached
//   TMCRA_FAILPOINTS=deliver.before_send:3        die the third time
//   TMCRA_FAILPOINTS=a,b:2                        several points
//
// Compiled in only when TMCRA_ENABLE_FAILPOINTS is defined (the dev, asan, ci and tsan presets);
// in a release build the macro expands to nothing and the variable is ignored.
#pragma once

#include <string_view>

namespace tmcra {

// Counts a hit of `name` and kills the process when the configured count is reached.
void FailpointHit(std::string_view name);
// Sleeps for ten minutes when TMCRA_FAILPOINTS names `name` (a stalled call: what a deadline
// must cut short).
void FailpointStall(std::string_view name);

}  // namespace tmcra

#ifdef TMCRA_ENABLE_FAILPOINTS
#define TMCRA_FAILPOINT(name) ::tmcra::FailpointHit(name)
#define TMCRA_FAILPOINT_STALL(name) ::tmcra::FailpointStall(name)
#else
#define TMCRA_FAILPOINT(name) \
  do {                        \
  } while (false)
#define TMCRA_FAILPOINT_STALL(name) \
  do {                              \
  } while (false)
#endif
