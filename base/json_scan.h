// The byte scan shared by the JSON reader and writer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tmcra {

namespace internal {

// PlainJsonRun without SSE2 (the path of other CPUs, and the tail after the sixteen-byte
// blocks): eight bytes at a time, then one. Each test sets a byte's high bit exactly when that
// byte matches, unless a lower byte of the word matched already (its borrow), so the lowest
// flagged byte is always a true match. Separate so that tests run it on every machine.
inline size_t PlainJsonRunWords(const unsigned char* p, size_t n) {
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
                                ((slash - kOnes) & ~slash)) &
                               kHigh;
      if (flagged != 0) return i + static_cast<size_t>(std::countr_zero(flagged)) / 8;
      i += 8;
    }
  }
  while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' && p[i] < 0x80) ++i;
  return i;
}

}  // namespace internal

// The number of bytes at the start of p[0..n) that a JSON string carries as they are: ASCII from
// 0x20 up (DEL included) other than '"' and '\\'. Sixteen bytes at a time where SSE2 is there
// (every x86-64): as signed bytes, a control byte (0x00..0x1f) and a non-ASCII one (0x80..0xff,
// negative) are exactly those below 0x20. The rest as internal::PlainJsonRunWords.
inline size_t PlainJsonRun(const unsigned char* p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i slash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (i + 16 <= n) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i special = _mm_or_si128(
        _mm_cmplt_epi8(w, space), _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, slash)));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(special));
    if (mask != 0) return i + static_cast<size_t>(std::countr_zero(mask));
    i += 16;
  }
#endif
  return i + internal::PlainJsonRunWords(p + i, n - i);
}

}  // namespace tmcra
