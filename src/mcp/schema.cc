#include "src/mcp/schema.h"

#include <cmath>
#include <functional>
#include <regex>

#include "base/utf8.h"

namespace tmcra::mcp {

namespace {

using json = nlohmann::json;

bool IsInteger(const json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

bool MatchesType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return IsInteger(v);
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    default:
      return "unknown";
  }
}

std::string Describe(const json& allowed) {
  std::string out;
  for (const auto& item : allowed) {
    if (!out.empty()) out += ", ";
    out += item.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return out;
}

std::string Err(const std::string& path, const std::string& what) { return path + ": " + what; }

// A non-negative integer keyword (minLength, maxItems, ...), however the schema spelled it.
std::optional<size_t> Count(const json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<size_t>();
  const auto v = it->get<int64_t>();
  return v < 0 ? std::nullopt : std::optional<size_t>(static_cast<size_t>(v));
}

std::optional<std::string> Validate(const json& v, const json& s, const std::string& path);

std::optional<std::string> ValidateType(const json& v, const json& s, const std::string& path) {
  auto it = s.find("type");
  if (it == s.end()) return std::nullopt;
  if (it->is_string()) {
    if (!MatchesType(v, it->get<std::string>())) {
      return Err(path, "expected " + it->get<std::string>() + ", got " + TypeName(v));
    }
  } else if (it->is_array()) {
    std::string names;
    for (const auto& t : *it) {
      if (t.is_string() && MatchesType(v, t.get<std::string>())) return std::nullopt;
      if (!names.empty()) names += " or ";
      names += t.is_string() ? t.get<std::string>() : "?";
    }
    return Err(path, "expected " + names + ", got " + TypeName(v));
  }
  return std::nullopt;
}

std::optional<std::string> ValidateNumber(const json& v, const json& s, const std::string& path) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  const auto fails = [&](const char* key, auto violates) -> const json* {
    auto it = s.find(key);
    return it != s.end() && it->is_number() && violates(d, it->template get<double>()) ? &*it
                                                                                       : nullptr;
  };
  if (auto m = fails("minimum", std::less<>())) return Err(path, "must be >= " + m->dump());
  if (auto m = fails("maximum", std::greater<>())) return Err(path, "must be <= " + m->dump());
  if (auto m = fails("exclusiveMinimum", std::less_equal<>())) {
    return Err(path, "must be > " + m->dump());
  }
  if (auto m = fails("exclusiveMaximum", std::greater_equal<>())) {
    return Err(path, "must be < " + m->dump());
  }
  return std::nullopt;
}

std::optional<std::string> ValidateString(const json& v, const json& s, const std::string& path) {
  if (!v.is_string()) return std::nullopt;
  const auto& text = v.get_ref<const std::string&>();
  const size_t length = CodePointLength(text);
  if (auto n = Count(s, "minLength"); n && length < *n) {
    return Err(path, "must be at least " + std::to_string(*n) + " characters long");
  }
  if (auto n = Count(s, "maxLength"); n && length > *n) {
    return Err(path, "must be at most " + std::to_string(*n) + " characters long");
  }
  if (auto it = s.find("pattern"); it != s.end() && it->is_string()) {
    // std::regex recurses per character; keep hostile input far from the stack limit.
    if (text.size() > 4096) return Err(path, "is too long to match the pattern");
    try {
      const std::regex re(it->get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(text, re)) {
        return Err(path, "does not match the pattern " + it->get<std::string>());
      }
    } catch (const std::regex_error&) {
      return Err(path, "the schema's pattern cannot be evaluated");
    }
  }
  return std::nullopt;
}

std::optional<std::string> ValidateArray(const json& v, const json& s, const std::string& path) {
  if (!v.is_array()) return std::nullopt;
  if (auto n = Count(s, "minItems"); n && v.size() < *n) {
    return Err(path, "must have at least " + std::to_string(*n) + " items");
  }
  if (auto n = Count(s, "maxItems"); n && v.size() > *n) {
    return Err(path, "must have at most " + std::to_string(*n) + " items");
  }
  if (auto it = s.find("items"); it != s.end() && it->is_object()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (auto e = Validate(v[i], *it, path + "[" + std::to_string(i) + "]")) return e;
    }
  }
  return std::nullopt;
}

std::optional<std::string> ValidateObject(const json& v, const json& s, const std::string& path) {
  if (!v.is_object()) return std::nullopt;
  if (auto it = s.find("required"); it != s.end() && it->is_array()) {
    for (const auto& name : *it) {
      if (name.is_string() && !v.contains(name.get<std::string>())) {
        return Err(path + "." + name.get<std::string>(), "is required");
      }
    }
  }
  const json* props = nullptr;
  if (auto it = s.find("properties"); it != s.end() && it->is_object()) props = &*it;
  const auto additional = s.find("additionalProperties");
  for (const auto& [key, item] : v.items()) {
    const std::string child = path + "." + key;
    if (props != nullptr) {
      if (auto p = props->find(key); p != props->end()) {
        if (auto e = Validate(item, *p, child)) return e;
        continue;
      }
    }
    if (additional == s.end()) continue;
    if (additional->is_boolean() && !additional->get<bool>()) {
      return Err(child, "is not a known field");
    }
    if (additional->is_object()) {
      if (auto e = Validate(item, *additional, child)) return e;
    }
  }
  return std::nullopt;
}

std::optional<std::string> Validate(const json& v, const json& s, const std::string& path) {
  if (s.is_boolean()) {
    return s.get<bool>() ? std::nullopt : std::optional<std::string>(Err(path, "is not allowed"));
  }
  if (!s.is_object()) return std::nullopt;
  if (auto e = ValidateType(v, s, path)) return e;
  if (auto it = s.find("const"); it != s.end() && v != *it) {
    return Err(path, "must be " + Describe(json::array({*it})));
  }
  if (auto it = s.find("enum"); it != s.end() && it->is_array()) {
    bool found = false;
    for (const auto& allowed : *it) found = found || allowed == v;
    if (!found) return Err(path, "must be one of " + Describe(*it));
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_array()) continue;
    std::optional<std::string> first_error;
    bool matched = false;
    for (const auto& option : *it) {
      auto e = Validate(v, option, path);
      if (!e) {
        matched = true;
        break;
      }
      if (!first_error) first_error = e;
    }
    if (!matched) return first_error ? first_error : Err(path, "matches no allowed form");
  }
  if (auto e = ValidateNumber(v, s, path)) return e;
  if (auto e = ValidateString(v, s, path)) return e;
  if (auto e = ValidateArray(v, s, path)) return e;
  return ValidateObject(v, s, path);
}

}  // namespace

std::optional<std::string> ValidateSchema(const json& value, const json& schema,
                                          const std::string& path) {
  return Validate(value, schema, path);
}

}  // namespace tmcra::mcp
