#include "receipts/fields.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace tmcra::receipts::internal {

namespace {

std::string Got(std::string_view expected, const json* value) {
  return std::string(expected) + " (got " + std::string(KindOf(value)) + ")";
}

// Length in bytes of the Python whitespace code point at the start of `s`, or 0.
size_t SpaceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  if (c == 0xC2 && s.size() >= 2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;  // U+0085, U+00A0
  if (s.size() < 3) return 0;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;  // U+1680
  if (c == 0xE2 && b(1) == 0x80) {
    const unsigned char t = b(2);
    if ((t >= 0x80 && t <= 0x8A) || t == 0xA8 || t == 0xA9 || t == 0xAF) return 3;  // U+2000..
  }
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

}  // namespace

Error Violation(std::string_view path, std::string_view reason) {
  std::string message;
  message.reserve(path.size() + 2 + reason.size());
  message.append(path).append(": ").append(reason);
  return Error::Protocol(std::move(message));
}

std::string_view KindOf(const json* value) {
  if (value == nullptr) return "missing";
  switch (value->type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "float";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

std::string Quote(std::string_view text) {
  constexpr size_t kMaxCodePoints = 64;
  size_t code_points = 0;
  size_t end = 0;
  for (; end < text.size(); ++end) {
    const bool lead = (static_cast<unsigned char>(text[end]) & 0xC0) != 0x80;
    if (lead && ++code_points > kMaxCodePoints) break;
  }
  std::string out =
      json(std::string(text.substr(0, end))).dump(-1, ' ', false, json::error_handler_t::replace);
  if (end < text.size()) out += "...";
  return out;
}

bool HasNonSpace(std::string_view text) {
  while (!text.empty()) {
    const size_t n = SpaceLength(text);
    if (n == 0) return true;
    text.remove_prefix(n);
  }
  return false;
}

bool IsStrictInteger(const json& value) { return value.is_number_integer(); }

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<Fields> Fields::Of(const json& value, std::string path) {
  if (!value.is_object()) return Violation(path, Got("must be an object", &value));
  return Fields(value, std::move(path));
}

std::string Fields::PathOf(std::string_view key) const {
  std::string out = path_;
  out.append(".").append(key);
  return out;
}

Error Fields::Fail(std::string_view key, std::string_view reason) const {
  return Violation(PathOf(key), reason);
}

const json* Fields::Find(std::string_view key) const {
  const auto it = value_->find(key);
  return it == value_->end() ? nullptr : &*it;
}

Result<const std::string*> Fields::NonEmptyString(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_string()) return Fail(key, Got("must be a non-empty string", v));
  const auto& s = v->get_ref<const std::string&>();
  if (!HasNonSpace(s)) {
    return Fail(key, s.empty() ? "must be a non-empty string (got an empty string)"
                               : "must be a non-empty string (got only whitespace)");
  }
  return &s;
}

Result<const std::string*> Fields::String(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_string()) return Fail(key, Got("must be a string", v));
  return &v->get_ref<const std::string&>();
}

Result<bool> Fields::Bool(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_boolean()) return Fail(key, Got("must be a boolean", v));
  return v->get<bool>();
}

Result<Fields> Fields::Object(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_object()) return Fail(key, Got("must be an object", v));
  return Fields(*v, PathOf(key));
}

Result<const json*> Fields::Array(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_array()) return Fail(key, Got("must be an array", v));
  return v;
}

Result<const json*> Fields::Integer(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !IsStrictInteger(*v)) return Fail(key, Got("must be an integer", v));
  return v;
}

Result<const json*> Fields::NonNegativeInteger(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !IsStrictInteger(*v)) return Fail(key, Got("must be an integer >= 0", v));
  if (v->is_number_integer() && !v->is_number_unsigned() && v->get<std::int64_t>() < 0) {
    return Fail(key,
                "must be an integer >= 0 (got " + std::to_string(v->get<std::int64_t>()) + ")");
  }
  return v;
}

Result<const json*> Fields::Number(std::string_view key) const {
  const json* v = Find(key);
  if (v == nullptr || !v->is_number()) return Fail(key, Got("must be a number", v));
  if (v->is_number_float() && !std::isfinite(v->get<double>())) {
    return Fail(key, "must be a finite number");
  }
  return v;
}

}  // namespace tmcra::receipts::internal
