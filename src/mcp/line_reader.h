// Splits a byte stream into newline-delimited lines (the MCP stdio framing).
//
// A trailing "\r" is stripped and blank lines are skipped. A line longer than `max_line` bytes is
// not buffered: its bytes are dropped as they arrive and it is reported once, as oversized, when
// its newline comes, so a hostile peer cannot make us hold more than `max_line` bytes.
// Not thread-safe; one reader thread owns it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tmcra::mcp {

class LineReader {
 public:
  // Called once per line; `oversized` is true (and `line` empty) for a dropped long line.
  using LineFn = std::function<void(std::string_view line, bool oversized)>;

  explicit LineReader(size_t max_line) : max_line_(max_line) {}

  void Feed(std::string_view chunk, const LineFn& on_line);
  // End of stream: emits a final unterminated line, if any.
  void Finish(const LineFn& on_line);

 private:
  void Emit(const LineFn& on_line);

  size_t max_line_;
  std::string buffer_;
  bool discarding_ = false;
};

}  // namespace tmcra::mcp
