#include "src/mcp/jsonrpc.h"

#include <string>

#include "base/json_reader.h"
#include "base/json_writer.h"

namespace tmcra::mcp {

json MakeResult(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json MakeError(const json& id, int code, std::string_view message, json data) {
  json error{{"code", code}, {"message", std::string(message)}};
  if (!data.is_null()) error["data"] = std::move(data);
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

json MakeRequest(const json& id, std::string_view method, json params) {
  return json{{"jsonrpc", "2.0"},
              {"id", id},
              {"method", std::string(method)},
              {"params", std::move(params)}};
}

json MakeNotification(std::string_view method, json params) {
  return json{{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

bool IsValidRequestId(const json& id) { return id.is_string() || id.is_number_integer(); }

ParsedLine ParseLine(std::string_view line) {
  ParsedLine out;
  if (line.size() > kMaxLineBytes) {
    out.error_code = rpc::kInvalidRequest;
    out.error_message = "Message exceeds the 8 MiB limit";
    return out;
  }
  if (NestingDepth(line, kMaxNestingDepth) > kMaxNestingDepth) {
    out.error_code = rpc::kInvalidRequest;
    out.error_message = "Message nesting exceeds the limit of 64 levels";
    return out;
  }
  // json::parse(line, nullptr, false), faster, and reading past a number no double holds.
  json value;
  JsonReadResult read = ReadJsonStrictPastOverflow(line, value);
  if (read.ok || read.number_out_of_range) {
    out.value = std::move(value);
    out.number_out_of_range = read.number_out_of_range;
    out.number_paths = std::move(read.number_paths);
    return out;
  }
  out.value = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (out.value.is_discarded()) {
    out.value = nullptr;
    out.error_code = rpc::kParseError;
    out.error_message = "Parse error: the line is not valid JSON";
  }
  return out;
}

std::string PathText(std::string prefix, const json& path, size_t from) {
  for (size_t i = from; i < path.size(); ++i) {
    if (path[i].is_string()) {
      if (!prefix.empty()) prefix += '.';
      prefix += path[i].get_ref<const std::string&>();
    } else {
      prefix += "[" + path[i].dump() + "]";
    }
  }
  return prefix;
}

std::string Serialize(const json& message) {
  // Byte for byte message.dump(-1, ' ', false, json::error_handler_t::replace), faster.
  return DumpJson(message);
}

std::string SerializeToolResult(const json& id, const json& structured, bool with_structured) {
  // Keys in the order the writer sorts them: id < jsonrpc < result; content < structuredContent;
  // text < type.
  const std::string text = Serialize(structured);
  // One allocation for the whole line: the text escaped (a quote or backslash in every eighth
  // byte is already a lot), the structured copy, and the newline WriteLine adds.
  std::string line;
  line.reserve(text.size() + text.size() / 8 + (with_structured ? text.size() : 0) + 128);
  line += "{\"id\":";
  AppendJson(line, id);
  line += ",\"jsonrpc\":\"2.0\",\"result\":{\"content\":[{\"text\":";
  AppendJsonString(line, text);
  line += ",\"type\":\"text\"}]";
  if (with_structured) {
    line += ",\"structuredContent\":";
    line += text;
  }
  line += "}}";
  return line;
}

}  // namespace tmcra::mcp
