// Canonical JSON, byte for byte as Python writes
//   json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
// which is what TMCRA's client hashes (idempotency keys) and compares (outbox rows).
//
// Rules (docs/contract.md §3.5): keys sorted by code point at every depth; no whitespace;
// `"` and `\` escaped; \n \r \t \b \f short escapes; other code points below U+0020 as \u00xx
// in lower-case hex; everything else (U+007F, U+2028, U+2029, all non-ASCII) written literally
// as UTF-8. Integers in decimal; floats as Python's repr() (1.0, 1e+16, 1e-05, NaN, Infinity).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tmcra {

std::string CanonicalJson(const nlohmann::json& value);

// Python's json.dumps(v, ensure_ascii=False) with its default separators (", " and ": ") and
// the members in `value`'s insertion order, as Python's dict keeps them: what TMCRA writes to
// its memory-controls files and shows in its feedback confirmation.
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

// Python's repr() of a float, e.g. 1.0, 0.1, 1e+16, 1e-05, -0.0, inf -> "Infinity" as json does.
std::string PythonFloatRepr(double value);

}  // namespace tmcra
