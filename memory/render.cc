#include "memory/render.h"

#include <cstdint>
#include <cstdio>

#include "base/utf8.h"

namespace tmcra::memory {

namespace {

// Decodes one code point of valid UTF-8 at text[i]; returns its length.
size_t Decode(std::string_view text, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
  cp = n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (size_t k = 1; k < n; ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3fu);
  }
  return n;
}

bool MustEscape(uint32_t cp) {
  if (cp < 0x20) return cp != '\n' && cp != '\t';
  if (cp == 0x7f) return true;
  if (cp >= 0x80 && cp <= 0x9f) return true;                      // C1
  if (cp == 0x2028 || cp == 0x2029) return true;                  // line/paragraph separators
  if (cp >= 0x202a && cp <= 0x202e) return true;                  // bidi embeddings and overrides
  if (cp >= 0x2066 && cp <= 0x2069) return true;                  // bidi isolates
  if (cp == 0x200e || cp == 0x200f || cp == 0x061c) return true;  // directional marks
  if (cp >= 0x200b && cp <= 0x200d) return true;                  // zero-width space/joiners
  if (cp == 0x2060 || cp == 0xfeff) return true;                  // word joiner, BOM
  return false;
}

void AppendEscape(std::string& out, uint32_t cp) {
  char buf[16];
  const int n = std::snprintf(buf, sizeof buf, "\\u%04x", cp);
  out.append(buf, static_cast<size_t>(n));
}

// Text of printable ASCII, newlines and tabs only (most stored text): nothing to decode,
// replace or escape but a '[' or '\\' that starts a line's content.
bool IsPlainText(std::string_view input) {
  for (const char ch : input) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f) return false;
  }
  return true;
}

std::string NeutralisePlainText(std::string_view input, bool* changed) {
  std::string out;
  out.reserve(input.size() + 8);
  bool line_start = true;
  bool escaped = false;
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < input.size(); ++i) {
    const char c = input[i];
    if (line_start) {
      if (c == ' ' || c == '\t') continue;  // still at the start of the line's content
      if (c == '[' || c == '\\') {
        out.append(input.substr(run, i - run));
        out.push_back('\\');
        run = i;
        escaped = true;
      }
      line_start = false;
    }
    if (c == '\n') line_start = true;
  }
  out.append(input.substr(run));
  if (changed != nullptr) *changed = escaped;
  return out;
}

}  // namespace

std::string NeutraliseText(std::string_view input, bool* changed) {
  if (IsPlainText(input)) return NeutralisePlainText(input, changed);
  const std::string valid = SanitizeUtf8(input);
  std::string out;
  out.reserve(valid.size() + 16);
  bool line_start = true;
  for (size_t i = 0; i < valid.size();) {
    uint32_t cp = 0;
    const size_t n = Decode(valid, i, cp);
    if (cp == '\r') {
      out.push_back('\n');
      i += (i + 1 < valid.size() && valid[i + 1] == '\n') ? size_t{2} : size_t{1};
      line_start = true;
      continue;
    }
    if (line_start) {
      if (cp == ' ' || cp == '\t') {
        out.push_back(static_cast<char>(cp));
        i += n;
        continue;  // still at the start of the line's content
      }
      if (cp == '[' || cp == '\\') out.push_back('\\');
      line_start = false;
    }
    if (cp == '\n') {
      out.push_back('\n');
      line_start = true;
    } else if (MustEscape(cp)) {
      AppendEscape(out, cp);
    } else {
      out.append(valid, i, n);
    }
    i += n;
  }
  if (changed != nullptr) *changed = out != input;
  return out;
}

std::string HeaderValue(std::string_view value) {
  std::string text = NeutraliseText(value);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '|' || c == '[' || c == ']' || c == '\n' || c == '\t') {
      out.push_back('_');
    } else {
      out.push_back(c);
    }
  }
  // NeutraliseText may have prefixed a backslash to a leading '['; it is now '_'.
  if (out.rfind("\\_", 0) == 0) out.erase(0, 1);
  return out;
}

}  // namespace tmcra::memory
