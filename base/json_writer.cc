#include "base/json_writer.h"

#include <charconv>

#include "base/json_scan.h"
#include "base/utf8.h"

namespace tmcra {

namespace {

using json = nlohmann::json;

// Escapes `text` into `out`; false (with `out` as it was) when `text` is not well-formed UTF-8.
bool AppendValidString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const size_t mark = out.size();
  out.reserve(out.size() + text.size() + 2);
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < n;) {
    i += PlainJsonRun(p + i, n - i);
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(text, i);
      if (len == 0) {
        out.resize(mark);
        return false;
      }
      i += len;
      continue;
    }
    out.append(text.data() + run, i - run);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
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
      default: {
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
        out.append(escaped, sizeof escaped);
      }
    }
    ++i;
    run = i;
  }
  out.append(text.data() + run, n - run);
  out.push_back('"');
  return true;
}

template <typename Int>
void AppendInteger(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  if (!AppendValidString(out, text)) {
    out += json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

void AppendJson(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
      AppendInteger(out, value.get<json::number_integer_t>());
      return;
    case json::value_t::number_unsigned:
      AppendInteger(out, value.get<json::number_unsigned_t>());
      return;
    case json::value_t::string:
      AppendJsonString(out, value.get_ref<const std::string&>());
      return;
    case json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& element : value) {
        if (!first) out.push_back(',');
        first = false;
        AppendJson(out, element);
      }
      out.push_back(']');
      return;
    }
    case json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, element] : value.get_ref<const json::object_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        AppendJsonString(out, key);
        out.push_back(':');
        AppendJson(out, element);
      }
      out.push_back('}');
      return;
    }
    default:  // floats, binary, discarded: exactly as nlohmann writes them
      out += value.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
  }
}

std::string DumpJson(const json& value) {
  std::string out;
  AppendJson(out, value);
  return out;
}

}  // namespace tmcra
