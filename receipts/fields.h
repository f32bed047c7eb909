// Checked access to the members of a Memory API response under validation. Internal to
// receipts/: the public API is receipts.h.
//
// nlohmann::json throws on a wrong-type access. Every accessor here checks the type first and
// returns the member, or a protocol Error whose message names the member's path in the response:
//
//   recall.prompt_evidence.content: must be a string (got null)
//
// Nothing here throws. The types follow the Python client's checks (FORMAT.md, "Value types"):
// an integer is a JSON integer (never a bool, never a float such as 1.0), a number is an integer
// or a finite float (never a bool), and a non-empty string has a code point outside Python's
// str.isspace() set.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/result.h"

namespace tmcra::receipts::internal {

using json = nlohmann::json;

// The non-retryable protocol error "<path>: <reason>".
Error Violation(std::string_view path, std::string_view reason);

// How messages name the kind of a value: "missing" for nullptr, else "null", "boolean",
// "integer", "float", "string", "array" or "object".
std::string_view KindOf(const json* value);

// `text` as a JSON string literal, cut to 64 code points (then "..." is appended), for quoting
// service values in messages. Invalid UTF-8 is replaced.
std::string Quote(std::string_view text);

// True when Python's `text.strip()` would be non-empty: `text` holds a code point outside the
// str.isspace() set (ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000). Invalid bytes count as non-space.
bool HasNonSpace(std::string_view text);

// True for a JSON integer (signed or unsigned); false for bools and for floats, even 1.0.
bool IsStrictInteger(const json& value);

// True when `text` is 64 lower-case hex digits.
bool IsSha256Hex(std::string_view text);

// A JSON object under validation, and its path in the response ("recall.prompt_evidence").
// Cheap to copy. The object must outlive the view.
class Fields {
 public:
  // The view of `value`, or "<path>: must be an object (got <kind>)".
  static Result<Fields> Of(const json& value, std::string path);

  const json& value() const { return *value_; }
  const std::string& path() const { return path_; }

  // "<path>.<key>".
  std::string PathOf(std::string_view key) const;
  // Violation(PathOf(key), reason).
  Error Fail(std::string_view key, std::string_view reason) const;

  // The member, or nullptr when absent.
  const json* Find(std::string_view key) const;

  // Each returns the member, checked, or an Error naming "<path>.<key>"; absent is an error.
  Result<const std::string*> NonEmptyString(std::string_view key) const;
  Result<const std::string*> String(std::string_view key) const;
  Result<bool> Bool(std::string_view key) const;
  Result<Fields> Object(std::string_view key) const;
  Result<const json*> Array(std::string_view key) const;
  Result<const json*> Integer(std::string_view key) const;
  Result<const json*> NonNegativeInteger(std::string_view key) const;
  Result<const json*> Number(std::string_view key) const;

 private:
  Fields(const json& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const json* value_;
  std::string path_;
};

}  // namespace tmcra::receipts::internal
