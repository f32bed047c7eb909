#include "base/utf8.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tmcra {

namespace {

// The length of the run of ASCII bytes at text[i...], eight bytes at a time.
size_t AsciiRun(std::string_view text, size_t i) {
  const size_t start = i;
  while (i + 8 <= text.size()) {
    uint64_t word = 0;
    std::memcpy(&word, text.data() + i, sizeof word);
    if ((word & 0x8080808080808080ULL) != 0) break;
    i += 8;
  }
  while (i < text.size() && static_cast<unsigned char>(text[i]) < 0x80) ++i;
  return i - start;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t need = 0;
  uint32_t min = 0;
  uint32_t cp = 0;
  if ((c & 0xe0) == 0xc0) {
    need = 1;
    min = 0x80;
    cp = c & 0x1fu;
  } else if ((c & 0xf0) == 0xe0) {
    need = 2;
    min = 0x800;
    cp = c & 0x0fu;
  } else if ((c & 0xf8) == 0xf0) {
    need = 3;
    min = 0x10000;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + need >= text.size()) return 0;  // truncated sequence
  for (size_t k = 1; k <= need; ++k) {
    const unsigned char cc = byte(i + k);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return need + 1;
}

size_t CodePointLength(std::string_view text) {
  size_t count = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t ascii = AsciiRun(text, i);
    if (ascii > 0) {
      i += ascii;
      count += ascii;
      continue;
    }
    const size_t n = Utf8SequenceLength(text, i);
    i += n == 0 ? 1 : n;
    ++count;
  }
  return count;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    i += AsciiRun(text, i);
    if (i >= text.size()) break;
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n\f\v");
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(" \t\r\n\f\v");
  return std::string(text.substr(begin, end - begin + 1));
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : SanitizeUtf8(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string TruncateCodePoints(std::string_view text, size_t max) {
  std::string clean = SanitizeUtf8(text);
  if (max == 0) return {};
  size_t points = 0;
  for (size_t i = 0; i < clean.size(); ++points) {
    if (points == max - 1) {
      const size_t rest = CodePointLength(std::string_view(clean).substr(i));
      if (rest <= 1) return clean;
      return clean.substr(0, i) + "\u2026";
    }
    i += std::max<size_t>(1, Utf8SequenceLength(clean, i));
  }
  return clean;
}

}  // namespace tmcra
