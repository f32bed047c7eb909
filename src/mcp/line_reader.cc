#include "src/mcp/line_reader.h"

namespace tmcra::mcp {

void LineReader::Feed(std::string_view chunk, const LineFn& on_line) {
  while (!chunk.empty()) {
    const size_t nl = chunk.find('\n');
    const std::string_view part = chunk.substr(0, nl);
    if (!discarding_) {
      if (buffer_.size() + part.size() > max_line_ + 1) {  // +1: a "\r" before the newline
        discarding_ = true;
        buffer_.clear();
        buffer_.shrink_to_fit();
      } else {
        buffer_.append(part);
      }
    }
    if (nl == std::string_view::npos) return;
    Emit(on_line);
    chunk.remove_prefix(nl + 1);
  }
}

void LineReader::Finish(const LineFn& on_line) {
  if (discarding_ || !buffer_.empty()) Emit(on_line);
}

void LineReader::Emit(const LineFn& on_line) {
  if (discarding_) {
    discarding_ = false;
    on_line({}, true);
    return;
  }
  if (!buffer_.empty() && buffer_.back() == '\r') buffer_.pop_back();
  if (buffer_.size() > max_line_) {
    buffer_.clear();
    on_line({}, true);
    return;
  }
  const bool blank = buffer_.find_first_not_of(" \t") == std::string::npos;
  if (!blank) on_line(buffer_, false);
  buffer_.clear();
}

}  // namespace tmcra::mcp
