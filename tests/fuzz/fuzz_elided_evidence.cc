// Differential fuzzing of the strict reader's ElidedMember: every input is read twice, with the
// top-level "evidence" built and elided, and the two must agree (JsonReadResult, the value but
// for the evidence, and the receipt's watermarks). The first byte picks whether the rest is
// read as it is or as the value of "evidence" in a recall-like answer, so that most inputs
// reach the elided path.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_reader.h"
#include "receipts/receipts.h"

namespace {

constexpr size_t kDepth = 64;

[[noreturn]] void Mismatch(const char* what) {
  std::fprintf(stderr, "elided and whole reads differ: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string text =
      (data[0] & 1) != 0 ? R"({"query_id":"q","evidence":)" + rest + R"(,"scope_name":"s"})" : rest;
  nlohmann::json whole;
  const tmcra::JsonReadResult a = tmcra::ReadJsonStrict(text, whole, kDepth);
  tmcra::ElidedMember elide{"evidence", tmcra::receipts::WatermarkKeys()};
  nlohmann::json elided;
  const tmcra::JsonReadResult b = tmcra::ReadJsonStrict(text, elided, kDepth, &elide);
  if (a.ok != b.ok || a.duplicate_key != b.duplicate_key || a.too_deep != b.too_deep ||
      a.number_out_of_range != b.number_out_of_range || a.number_paths != b.number_paths) {
    Mismatch("result flags");
  }
  if (!a.ok) return 0;
  const bool object_evidence =
      whole.is_object() && whole.contains("evidence") && whole["evidence"].is_object();
  // Not elided although it could be: too much work to pick the watched integers; then the
  // member was read whole.
  if (elide.elided && !object_evidence) Mismatch("elided flag");
  nlohmann::json expected = whole;
  if (elide.elided) expected["evidence"] = nlohmann::json::object();
  if (elided != expected) Mismatch("value");
  const nlohmann::json* node = elide.elided ? &elided["evidence"] : nullptr;
  if (tmcra::receipts::Watermarks(elided, node, &elide) != tmcra::receipts::Watermarks(whole)) {
    Mismatch("watermarks");
  }
  return 0;
}
