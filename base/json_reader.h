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

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmcra {

struct JsonReadResult {
  bool ok = false;
  bool duplicate_key = false;  // with !ok: an object held a key twice
  bool too_deep = false;       // with !ok: arrays and objects nested deeper than max_depth
  // With !ok: a number that no double holds (1e400, or an integer of 400 digits; json::parse
  // refuses it too) was refused. `number_paths` says where: the keys and indices from the root
  // down to the first one (a JSON array; [] when the whole text is that number) and, when
  // ReadJsonStrictPastOverflow reads on and the root is an array, the first one in each
  // element that holds one.
  bool number_out_of_range = false;
  std::vector<nlohmann::json> number_paths;
};

// A member of the top-level object that ReadJsonStrict checks exactly as strictly as the rest
// (the same grammar, UTF-8, repeated keys and depth: the same JsonReadResult for every text)
// but does not build: when its value is an object, it becomes {} in the result, and what a
// caller still needs from it is gathered meanwhile: for each `watch` key, the first integer
// held under that key by an object of the member's value, in the order a pre-order walk of the
// built value would meet those objects (an object before its members' values, members in key
// order, elements in index order). A value that is not an object is built as usual (`elided`
// stays false), and so is one whose watched integers would take too much work to pick (paths
// compared and copied past twice the text's size: the text is then read again, whole). The
// outputs are reset first and mean something only when the read succeeds.
struct ElidedMember {
  ElidedMember(std::string_view member_key, std::vector<std::string> watched_keys)
      : key(member_key), watch(std::move(watched_keys)) {}

  std::string_view key;               // in
  std::vector<std::string> watch;     // in
  bool elided = false;                // out: the member was there, an object, and is {} now
  std::vector<nlohmann::json> found;  // out: per watch key, the integer found, or null
};

// Parses `text` into `out` (left null on failure). `max_depth` 0: no limit. `elide`: see
// ElidedMember (its outputs are reset first).
JsonReadResult ReadJsonStrict(std::string_view text, nlohmann::json& out, size_t max_depth = 0,
                              ElidedMember* elide = nullptr);

// ReadJsonStrict (without elision), reading on past every number that no double holds: each
// becomes null. When such numbers are the text's only fault, the result is !ok with
// number_out_of_range and their paths, and `out` holds the rest, so a caller can still say
// which request or which field was refused. On any other fault `out` is left null and
// number_out_of_range is false, as for a text that holds no such number.
JsonReadResult ReadJsonStrictPastOverflow(std::string_view text, nlohmann::json& out,
                                          size_t max_depth = 0);

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
