#include "base/json_depth.h"

#include <cstddef>

#include "base/json_scan.h"

namespace tmcra {

int JsonNestingDepth(std::string_view text, int limit) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    if (in_string) {
      // Only '"' and '\\' matter inside a string; the scan also stops at control and non-ASCII
      // bytes, which are stepped over one at a time.
      i += PlainJsonRun(p + i, n - i);
      if (i >= n) break;
      if (p[i] == '\\') {
        ++i;  // the escaped byte
      } else if (p[i] == '"') {
        in_string = false;
      }
      continue;
    }
    switch (p[i]) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return limit + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

}  // namespace tmcra
