// The wiring of tmcra-mcp: the only place that builds concrete parts and hands them to each
// other. main() and the test server both start from here, so they serve the same tools.
#pragma once

#include <memory>

#include "filter/content_filter.h"
#include "queue/delivery.h"
#include "src/api/memory_api.h"
#include "src/common/result.h"
#include "src/controls/memory_controls.h"
#include "src/mcp/server.h"
#include "src/tools/content_filtering.h"

namespace tmcra::app {

// The parts of a running tmcra-mcp. The server is declared last so it is destroyed first: its
// tool threads are joined before the memory they use goes away.
struct App {
  std::unique_ptr<api::MemoryApi> memory;
  std::unique_ptr<queue::Sender> sender;
  std::unique_ptr<controls::ControlStore> controls;
  std::unique_ptr<queue::DeliveryService> delivery;  // stopped before the memory goes
  std::unique_ptr<mcp::Server> server;
  // The content filter the tools apply to every stored text, and what it removed.
  std::unique_ptr<filter::ContentFilter> filter;
  std::unique_ptr<tools::FilterTally> filter_tally;
};

// What a caller other than main() may change: the fuzzer runs the tools on its own thread.
struct AppOptions {
  bool inline_tools = false;  // mcp::ServerOptions::inline_tools
};

// The production server with every tmcra_* tool registered over the memory the environment
// selects (embedded by default). Opens no store: the memory and the outbox are opened on first
// use; background delivery starts at once only when an outbox file already exists (pending
// writes of an earlier run are delivered without waiting for the host). Fails, before anything
// is opened, when the settings are invalid (src/config/settings.h); the message names the
// setting or file and never holds a credential.
Result<App> BuildApp(const AppOptions& app_options = {});

}  // namespace tmcra::app
