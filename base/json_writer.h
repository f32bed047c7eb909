// Compact JSON text, fast.
//
// Every MCP answer is written as one line of compact JSON, and a tool's answer holds its result
// twice (structuredContent, and the same object as a JSON string in content[0].text), so long
// strings dominate. nlohmann's dump() decodes every byte of every string through a UTF-8 state
// machine; this writer copies runs of plain bytes, escapes the rest, and gives byte for byte
// what value.dump(-1, ' ', false, json::error_handler_t::replace) gives: the same escapes
// (\" \\ \b \f \n \r \t, \u00xx in lower-case hex for other control bytes, nothing else), keys in
// the object's order, and numbers, and any string that is not well-formed UTF-8, written by
// nlohmann itself.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tmcra {

void AppendJson(std::string& out, const nlohmann::json& value);
std::string DumpJson(const nlohmann::json& value);

// `text` as a JSON string literal, quotes included.
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace tmcra
