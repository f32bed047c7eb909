// The byte scan shared by the JSON reader and writer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tmcra {

// The number of bytes at the start of p[0..n) that a JSON string carries as they are: ASCII from
// 0x20 up (DEL included) other than '"' and '\\'. Eight bytes at a time: each test sets a byte's
// high bit exactly when that byte matches, unless a lower byte of the word matched already (its
// borrow), so the lowest flagged byte is always a true match.
inline size_t PlainJsonRun(const unsigned char* p, size_t n) {
  size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    constexpr uint64_t kOnes = 0x0101010101010101ULL;
    constexpr uint64_t kHigh = 0x8080808080808080ULL;
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      const uint64_t quote = w ^ (kOnes * '"');
      const uint64_t slash = w ^ (kOnes * '\\');
      const uint64_t flagged = (w | ((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) |
                                ((slash - kOnes) & ~slash)) & kHigh;
      if (flagged != 0) return i + static_cast<size_t>(std::countr_zero(flagged)) / 8;
      i += 8;
    }
  }
  while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' && p[i] < 0x80) ++i;
  return i;
}

}  // namespace tmcra
