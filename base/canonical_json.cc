#include "base/canonical_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <system_error>

#include "base/utf8.h"

namespace tmcra {

namespace {

void AppendString(std::string& out, std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  // Python strings hold no invalid UTF-8; replace it rather than write bytes no reader accepts.
  const std::string s = IsValidUtf8(raw) ? std::string(raw) : SanitizeUtf8(raw);
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0x0f]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// The writer behind both forms: `item_sep`/`key_sep` are Python's separators; object members
// come in the order of the JSON type (sorted for json, insertion order for ordered_json).
template <class Json>
void Append(std::string& out, const Json& v, std::string_view item_sep, std::string_view key_sep) {
  using T = typename Json::value_t;
  switch (v.type()) {
    case T::null:
      out += "null";
      return;
    case T::boolean:
      out += v.template get<bool>() ? "true" : "false";
      return;
    case T::number_integer:
      out += std::to_string(v.template get<std::int64_t>());
      return;
    case T::number_unsigned:
      out += std::to_string(v.template get<std::uint64_t>());
      return;
    case T::number_float:
      out += PythonFloatRepr(v.template get<double>());
      return;
    case T::string:
      AppendString(out, v.template get_ref<const std::string&>());
      return;
    case T::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += item_sep;
        first = false;
        Append(out, item, item_sep, key_sep);
      }
      out.push_back(']');
      return;
    }
    case T::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += item_sep;
        first = false;
        AppendString(out, key);
        out += key_sep;
        Append(out, item, item_sep, key_sep);
      }
      out.push_back('}');
      return;
    }
    case T::binary:
    case T::discarded:
      out += "null";
      return;
  }
}

}  // namespace

std::string PythonFloatRepr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form: d[.ddd]e[+-]XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  bool negative = false;
  if (!mantissa.empty() && mantissa[0] == '-') {
    negative = true;
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  // Python's float_repr_style 'short': fixed notation when -4 <= exponent < 16.
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += 'e';
  out += exponent < 0 ? '-' : '+';
  const int abs_exp = exponent < 0 ? -exponent : exponent;
  if (abs_exp < 10) out += '0';
  out += std::to_string(abs_exp);
  return out;
}

std::string CanonicalJson(const nlohmann::json& value) {
  // nlohmann's default object is a std::map ordered by std::string's byte comparison; byte
  // order of UTF-8 equals code-point order, which is what Python's sort_keys uses.
  std::string out;
  Append(out, value, ",", ":");
  return out;
}

std::string PythonJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Append(out, value, ", ", ": ");
  return out;
}

}  // namespace tmcra
