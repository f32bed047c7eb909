// tmcra-mcp-testserver: the production server plus the test-only tools of test_tools.h.
#include <spdlog/spdlog.h>

#include <exception>

#include "base/log.h"
#include "src/app/app_wiring.h"
#include "tests/support/test_tools.h"

int main() {
  try {
    tmcra::InitLogging();
    tmcra::mcp::Server::InstallSignalHandlers();
    auto app = tmcra::app::BuildApp();
    if (!app) {
      spdlog::critical("configuration: {}", app.error().message);
      return 1;
    }
    tmcra::testing::RegisterTestTools(app->server->tools());
    spdlog::info("tmcra-mcp-testserver waiting for an MCP client on stdin");
    return app->server->Run(0, 1);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
