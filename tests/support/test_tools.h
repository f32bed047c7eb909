// Test-only tools, registered by the test harness (never by the production binary):
//   test_elicit {message}  sends elicitation/create and reports the outcome;
//   test_sleep  {ms}       sleeps in small steps, stopping early when cancelled;
//   test_echo   {...}      echoes its arguments (a schema with one of each kind of field).
#pragma once

#include "src/mcp/tool_set.h"

namespace tmcra::testing {

// `with_sleep` false leaves test_sleep out (the fuzzer must not sleep).
void RegisterTestTools(mcp::ToolSet& tools, bool with_sleep = true);

}  // namespace tmcra::testing
