// UTF-8 helpers. The service counts text lengths in Unicode code points (Python's len()), so
// every limit we enforce on text uses CodePointLength.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tmcra {

// Number of code points. Each byte of an invalid sequence counts as one code point, the way
// Python counts the U+FFFD replacements after a lossy decode.
size_t CodePointLength(std::string_view text);

// The length of the well-formed UTF-8 sequence starting at text[i] (1 for ASCII), or 0 when it
// is invalid or cut short (overlongs, surrogates and code points above U+10FFFF are invalid).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(std::string_view text);

// `text` without leading and trailing ASCII whitespace (space, \t, \r, \n, \f, \v), as the
// service trims its strings.
std::string Trim(std::string_view text);

// `text` with every invalid sequence replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// `text` for an HTML page, as element text or a double- or single-quoted attribute value:
// sanitised (SanitizeUtf8), with & < > " ' as character references.
std::string HtmlEscape(std::string_view text);

// `text` sanitised (SanitizeUtf8) and cut to at most `max` code points, "…" taking the last
// place when it is cut.
std::string TruncateCodePoints(std::string_view text, size_t max);

}  // namespace tmcra
