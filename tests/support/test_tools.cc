#include "tests/support/test_tools.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace tmcra::testing {

using json = nlohmann::json;

void RegisterTestTools(mcp::ToolSet& tools, bool with_sleep) {
  mcp::ToolSpec elicit;
  elicit.name = "test_elicit";
  elicit.title = "Test elicitation";
  elicit.description = "Test only: asks the user to confirm through elicitation/create.";
  elicit.input_schema = json::parse(R"({"type":"object","properties":{
      "message":{"type":"string","minLength":1},
      "timeout_ms":{"type":"integer","minimum":1,"maximum":600000}},
      "required":["message"],"additionalProperties":false})");
  elicit.output_schema = json::parse(R"({"type":"object","properties":{
      "outcome":{"type":"string"},"content":{"type":"object"},"error":{"type":"string"}},
      "required":["outcome"]})");
  tools.Add(std::move(elicit), [](const json& args, mcp::ToolContext& ctx) {
    if (!ctx.can_elicit()) return mcp::ToolResult::Ok({{"outcome", "unsupported"}});
    const json schema = json::parse(R"({"type":"object","properties":{
        "confirm":{"type":"boolean","title":"Confirm","default":false}},
        "required":["confirm"]})");
    const auto timeout = std::chrono::milliseconds(args.value("timeout_ms", 30000));
    auto answer = ctx.Elicit(args["message"].get<std::string>(), schema, timeout);
    if (!answer) {
      return mcp::ToolResult::Ok({{"outcome", "error"}, {"error", answer.error().ToString()}});
    }
    json out{{"outcome", answer->action}};
    if (answer->action == "accept") out["content"] = answer->content;
    return mcp::ToolResult::Ok(out);
  });

  if (with_sleep) {
    mcp::ToolSpec sleep;
    sleep.name = "test_sleep";
    sleep.title = "Test sleep";
    sleep.description = "Test only: sleeps for ms milliseconds unless cancelled.";
    sleep.input_schema = json::parse(R"({"type":"object","properties":{
      "ms":{"type":"integer","minimum":0,"maximum":600000}},
      "required":["ms"],"additionalProperties":false})");
    sleep.output_schema = json::parse(R"({"type":"object","properties":{
      "slept_ms":{"type":"integer"},"cancelled":{"type":"boolean"}},
      "required":["slept_ms","cancelled"]})");
    tools.Add(std::move(sleep), [](const json& args, mcp::ToolContext& ctx) {
      const auto total = args["ms"].get<long>();
      long slept = 0;
      while (slept < total && !ctx.cancelled()) {
        const long step = std::min(5L, total - slept);
        std::this_thread::sleep_for(std::chrono::milliseconds(step));
        slept += step;
      }
      return mcp::ToolResult::Ok({{"slept_ms", slept}, {"cancelled", ctx.cancelled()}});
    });
  }

  mcp::ToolSpec echo;
  echo.name = "test_echo";
  echo.description = "Test only: returns its arguments.";
  echo.input_schema = json::parse(R"({"type":"object","properties":{
      "text":{"type":"string","maxLength":5},
      "count":{"type":"integer","minimum":1,"maximum":10},
      "mode":{"type":"string","enum":["a","b"]},
      "flag":{"type":"boolean"},
      "items":{"type":"array","maxItems":2,"items":{"type":"object",
          "properties":{"role":{"type":"string","enum":["user","assistant"]}},
          "required":["role"]}},
      "maybe":{"anyOf":[{"type":"string"},{"type":"null"}]}},
      "additionalProperties":false})");
  echo.annotations = json{{"readOnlyHint", true}};
  tools.Add(std::move(echo), [](const json& args, mcp::ToolContext&) {
    if (args.contains("text") && args["text"] == "throw") throw std::runtime_error("boom");
    return mcp::ToolResult::Ok({{"echo", args}});
  });
}

}  // namespace tmcra::testing
