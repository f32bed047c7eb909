// libFuzzer target over the stdio framing and the whole dispatch path: arbitrary bytes are split
// into lines by the real LineReader and handed to a real Server (tools run inline), whose
// responses are written to /dev/null. A crash, a sanitizer report, a hang or an uncaught
// exception is a bug.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/mcp/line_reader.h"
#include "src/mcp/server.h"
#include "src/tools/status_tool.h"
#include "tests/support/test_tools.h"

namespace {

int DevNull() {
  static const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tmcra::mcp::ServerOptions options;
  options.version = "fuzz";
  options.inline_tools = true;
  tmcra::mcp::Server server(options);
  tmcra::tools::RegisterStatusTool(server.tools(),
                                   {[](const char* name) -> std::optional<std::string> {
                                     if (std::string_view(name) == "HOME")
                                       return std::string("/nonexistent-fuzz-home");
                                     return std::nullopt;
                                   }});
  tmcra::testing::RegisterTestTools(server.tools(), /*with_sleep=*/false);
  server.SetOutputForTest(DevNull());

  tmcra::mcp::LineReader reader(tmcra::mcp::kMaxLineBytes);
  const tmcra::mcp::LineReader::LineFn on_line = [&](std::string_view line, bool oversized) {
    server.HandleLineForTest(line, oversized);
  };
  reader.Feed(std::string_view(reinterpret_cast<const char*>(data), size), on_line);
  reader.Finish(on_line);
  return 0;
}
