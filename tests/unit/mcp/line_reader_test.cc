#include "src/mcp/line_reader.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using tmcra::mcp::LineReader;

namespace {

struct Collected {
  std::vector<std::string> lines;
  int oversized = 0;
  LineReader::LineFn fn() {
    return [this](std::string_view line, bool over) {
      if (over) {
        ++oversized;
      } else {
        lines.emplace_back(line);
      }
    };
  }
};

}  // namespace

TEST_CASE("lines split across chunks are joined", "[mcp][framing]") {
  LineReader reader(100);
  Collected c;
  reader.Feed("{\"a\":", c.fn());
  reader.Feed("1}\n{\"b\":2}\r\n\n   \n{\"c\"", c.fn());
  reader.Feed(":3}", c.fn());
  reader.Finish(c.fn());
  REQUIRE(c.lines == std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "{\"c\":3}"});
}

TEST_CASE("an oversized line is dropped and reported once, then reading goes on",
          "[mcp][framing][limits]") {
  LineReader reader(10);
  Collected c;
  reader.Feed(std::string(8, 'x'), c.fn());
  reader.Feed(std::string(50, 'y'), c.fn());
  reader.Feed(std::string(50, 'z') + "\nok\n", c.fn());
  CHECK(c.oversized == 1);
  CHECK(c.lines == std::vector<std::string>{"ok"});
  reader.Feed(std::string(10, 'q') + "\n", c.fn());  // exactly at the limit is fine
  CHECK(c.lines.size() == 2);
}
