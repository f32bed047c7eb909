// Validation of tool arguments against the JSON Schema each tool declares.
//
// Supports the keywords our tool schemas use: type (a name or a list), enum, const, properties,
// required, additionalProperties (false or a schema), items, minItems, maxItems, minLength and
// maxLength (in code points, as the service counts), pattern (ECMAScript), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, anyOf and oneOf. Annotation keywords (title,
// description, default, format, examples, $schema) are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tmcra::mcp {

// Returns std::nullopt when `value` conforms, else a message naming the offending field with
// its path from `path` (e.g. "arguments.messages[0].role: must be one of ...").
std::optional<std::string> ValidateSchema(const nlohmann::json& value, const nlohmann::json& schema,
                                          const std::string& path = "arguments");

}  // namespace tmcra::mcp
