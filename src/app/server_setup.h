// The wiring of tmcra-mcp: the only place that builds concrete parts and hands them to each
// other. main() and the test server both start from here, so they serve the same tools.
#pragma once

#include <memory>

#include "src/mcp/server.h"

namespace tmcra::app {

// The production server with every tmcra_* tool registered.
std::unique_ptr<mcp::Server> BuildServer();

}  // namespace tmcra::app
