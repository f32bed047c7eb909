// tmcra-mcp-console: the program `tmcra-mcp console` runs (src/app/console.h). A program of its
// own so that tmcra-mcp, which every host hook starts, does not load the web server's libraries.

#include <spdlog/spdlog.h>

#include <exception>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "src/app/console.h"

int main(int argc, char** argv) {
  try {
    tmcra::InitLogging(spdlog::level::warn);
    return tmcra::app::RunConsole(std::vector<std::string_view>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    spdlog::critical("tmcra-mcp console: {}", e.what());
    return 1;
  }
}
