// Strict JSON text to nlohmann::json, fast.
//
// Accepts exactly what nlohmann's json::parse accepts for one JSON text (RFC 8259: no comments,
// no trailing commas, no leading zeros, no control characters or invalid UTF-8 in strings, no
// lone surrogate escapes, no number that overflows a double, nothing after the value but
// whitespace) and builds the same value: integers as int64 when negative and as uint64 when not
// (a double when they overflow), other numbers as the nearest double. Unlike json::parse it
// does not skip a UTF-8 byte order mark, and it refuses an object that holds a key twice
// (`duplicate_key` says so), because a second value under one key is ambiguous.
//
// Iterative (no recursion), so nesting depth costs no stack; a caller that caps depth passes
// `max_depth` (arrays and objects nested deeper are refused with `too_deep`, as soon as the
// reader gets there). nlohmann's lexer copies every byte twice (token buffer and
// error context); this reader copies runs of plain string bytes at once, about 3x faster.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace tmcra {

struct JsonReadResult {
  bool ok = false;
  bool duplicate_key = false;  // with !ok: an object held a key twice
  bool too_deep = false;       // with !ok: arrays and objects nested deeper than max_depth
};

// Parses `text` into `out` (left null on failure). `max_depth` 0: no limit.
JsonReadResult ReadJsonStrict(std::string_view text, nlohmann::json& out, size_t max_depth = 0);

// Exactly json::parse(text, nullptr, false): a discarded value on error, the last value under a
// repeated key, a leading BOM skipped. ReadJsonStrict answers whenever it accepts (it then
// builds the same value), so nlohmann parses only what it refuses.
nlohmann::json ParseJsonLenient(std::string_view text);

// The same for nlohmann::ordered_json (members in document order), in O(n log n) for an object
// of n members: ordered_json's own parse inserts each key after looking for it member by
// member, n^2/2 comparisons (a memory-controls state with 10,000 sessions took 116 ms to
// parse). The strict reader refuses a repeated key; the lenient parse hands such a document,
// and whatever else the reader refuses, to nlohmann, so its value is exactly
// ordered_json::parse(text, nullptr, false)'s.
JsonReadResult ReadOrderedJsonStrict(std::string_view text, nlohmann::ordered_json& out);
nlohmann::ordered_json ParseOrderedJsonLenient(std::string_view text);

}  // namespace tmcra
