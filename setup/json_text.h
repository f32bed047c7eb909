// A host's JSON config file as text, read and written back so that only what an edit changed
// differs (used by config_edit.cc and hooks_edit.cc; not part of the library's interface).
//
// Reading is strict: a repeated key, an integer beyond 64 bits or a comment is refused, since
// writing the document back would lose it. Writing uses the key order of the document, the
// indent of the original's first indented line (2 spaces when there is none), its line endings
// (CRLF stays CRLF) and its final newline: the text ends with one when the original did or was
// blank (a new file), and without one when the original ended without.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::setup {

// True when `text` is only spaces, tabs and line breaks.
bool IsBlankText(std::string_view text);

// "line L, column C" of a byte offset (1-based, columns in bytes).
std::string TextPosition(std::string_view text, size_t offset);

// The document (an empty object for blank text). Errors never quote the text.
Result<nlohmann::ordered_json> ParseJsonConfig(std::string_view text);

// `doc` as text laid out like `original`.
Result<std::string> DumpJsonConfig(const nlohmann::ordered_json& doc, std::string_view original);

}  // namespace tmcra::setup
