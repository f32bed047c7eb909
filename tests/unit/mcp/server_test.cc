// The protocol layer driven over real pipes: negotiation, dispatch, per-version tool fields,
// schema validation, batches, cancellation, elicitation and limits.
#include "src/mcp/server.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "tests/support/pipe_session.h"
#include "tests/support/test_tools.h"

using namespace std::chrono_literals;
using tmcra::mcp::Server;
using tmcra::mcp::ServerOptions;
using tmcra::testing::PipeSession;
using json = nlohmann::json;

namespace {

std::unique_ptr<Server> MakeServer(std::chrono::microseconds hand_off_delay = 2ms) {
  ServerOptions options;
  options.hand_off_delay = hand_off_delay;
  options.name = "test";
  options.title = "Test Server";
  options.version = "9.9.9";
  options.instructions = "be careful";
  auto server = std::make_unique<Server>(options);
  tmcra::testing::RegisterTestTools(server->tools());
  return server;
}

// The reading thread's two ways of letting another thread read while it answers a call: a
// standby that takes over only when the call runs long (the default), and the hand-off on
// every call (delay 0; also what happens when no timer or standby can be had).
std::chrono::microseconds HandOffDelay() {
  const auto delay = std::chrono::microseconds(GENERATE(as<long>{}, 2000, 0));
  UNSCOPED_INFO("hand-off delay " << delay.count() << " us");
  return delay;
}

json FindTool(const json& list, const std::string& name) {
  for (const auto& t : list["result"]["tools"]) {
    if (t["name"] == name) return t;
  }
  return nullptr;
}

json CallTool(PipeSession& s, const json& id, const std::string& name, json args) {
  return s.Call(id, "tools/call", {{"name", name}, {"arguments", std::move(args)}});
}

}  // namespace

TEST_CASE("initialize echoes each supported version and answers the newest otherwise",
          "[mcp][negotiation]") {
  for (const char* version : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}) {
    PipeSession s(MakeServer());
    json result = s.Initialize(version);
    CHECK(result["protocolVersion"] == version);
    CHECK(result["serverInfo"]["name"] == "test");
    CHECK(result["serverInfo"]["version"] == "9.9.9");
    CHECK(result["instructions"] == "be careful");
    CHECK(result["capabilities"].contains("tools"));
    CHECK(s.server().negotiated_version() == version);
    CHECK(s.Finish() == 0);
  }
  PipeSession s(MakeServer());
  CHECK(s.Initialize("2026-07-28")["protocolVersion"] == "2025-11-25");
  PipeSession old(MakeServer());
  CHECK(old.Initialize("2024-10-07")["protocolVersion"] == "2025-11-25");
}

TEST_CASE("serverInfo.title only from 2025-06-18", "[mcp][negotiation]") {
  PipeSession a(MakeServer());
  CHECK_FALSE(a.Initialize("2025-03-26")["serverInfo"].contains("title"));
  PipeSession b(MakeServer());
  CHECK(b.Initialize("2025-06-18")["serverInfo"]["title"] == "Test Server");
}

TEST_CASE("initialize without protocolVersion is invalid params, a second one is refused",
          "[mcp][negotiation]") {
  PipeSession s(MakeServer());
  CHECK(s.Call(1, "initialize", json::object())["error"]["code"] == -32602);
  s.Initialize("2025-06-18");
  CHECK(s.Call(2, "initialize", {{"protocolVersion", "2025-06-18"}})["error"]["code"] == -32600);
}

TEST_CASE("ping, server/discover and unknown methods are answered at any time", "[mcp][dispatch]") {
  PipeSession s(MakeServer());
  CHECK(s.Call(1, "ping")["result"] == json::object());
  json discover = s.Call("server-discover-probe-1", "server/discover",
                         {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}});
  CHECK(discover["error"]["code"] == -32601);
  CHECK(discover["id"] == "server-discover-probe-1");
  s.Initialize("2025-11-25");
  CHECK(s.Call(2, "resources/list")["error"]["code"] == -32601);
  CHECK(s.Call(3, "server/discover")["error"]["code"] == -32601);
  CHECK(s.Call("p", "ping")["id"] == "p");
  CHECK(s.Finish() == 0);
}

TEST_CASE("before initialize is answered, tools are neither listed nor called",
          "[mcp][lifecycle]") {
  PipeSession s(MakeServer());
  for (const char* method : {"tools/list", "tools/call"}) {
    INFO(method);
    json r = s.Call(method, method, {{"name", "test_echo"}, {"arguments", json::object()}});
    CHECK(r["id"] == method);
    CHECK(r["error"]["code"] == -32600);
    CHECK(r["error"]["message"] ==
          "Invalid Request: the session is not initialized; send initialize first");
  }
  // Refused before anything is looked at: an unknown tool, bad arguments.
  CHECK(CallTool(s, 1, "nope", json::object())["error"]["code"] == -32600);
  CHECK(CallTool(s, 2, "test_echo", {{"count", "x"}})["error"]["code"] == -32600);
  // ping, server/discover and unknown methods are answered as at any time.
  CHECK(s.Call(3, "ping")["result"] == json::object());
  CHECK(s.Call(4, "server/discover")["error"]["code"] == -32601);
  CHECK(s.Call(5, "resources/list")["error"]["code"] == -32601);
  s.Initialize("2025-11-25");
  CHECK(s.Call(6, "tools/list")["result"]["tools"].size() == 3);
  CHECK(CallTool(s, 7, "test_echo", {{"count", 2}})["result"]["structuredContent"] ==
        json{{"echo", {{"count", 2}}}});
  CHECK(s.Finish() == 0);
}

TEST_CASE("notifications are never answered, even unknown or malformed ones", "[mcp][dispatch]") {
  PipeSession s(MakeServer());
  s.SendLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  s.SendLine(R"({"jsonrpc":"2.0","method":"notifications/whatever","params":{}})");
  s.SendLine(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}})");
  s.SendLine(R"({"jsonrpc":"1.0","method":"x"})");
  CHECK(s.Call(1, "ping")["id"] == 1);  // the first line back is the ping's answer
}

TEST_CASE("malformed input gets errors with id null and the session goes on", "[mcp][dispatch]") {
  PipeSession s(MakeServer());
  s.SendLine("{oops");
  json e = s.Read();
  CHECK(e["error"]["code"] == -32700);
  CHECK(e["id"].is_null());
  s.SendLine("42");
  CHECK(s.Read()["error"]["code"] == -32600);
  s.SendLine(R"({"jsonrpc":"2.0","id":null,"method":"ping"})");
  e = s.Read();
  CHECK(e["error"]["code"] == -32600);
  CHECK(e["id"].is_null());
  s.SendLine(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})");
  CHECK(s.Read()["error"]["code"] == -32600);
  s.SendLine(R"({"jsonrpc":"2.0","id":7,"method":5})");
  e = s.Read();
  CHECK(e["error"]["code"] == -32600);
  CHECK(e["id"] == 7);
  s.SendLine(R"({"id":8,"method":"ping"})");
  CHECK(s.Read()["error"]["code"] == -32600);
  CHECK(s.Call(9, "ping")["result"] == json::object());
}

TEST_CASE("a number no double holds is an invalid input, answered with the request's id",
          "[mcp][dispatch]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  const auto answer = [&s](const std::string& line) {
    s.SendLine(line);
    return s.Read();
  };
  // In a tool's arguments: a tool error naming the field, as for any invalid argument.
  json r = answer(R"({"jsonrpc":"2.0","id":1,"method":"tools/call",)"
                  R"("params":{"name":"test_echo","arguments":{"count":1e400}}})");
  CHECK(r["id"] == 1);
  CHECK(r["result"]["isError"] == true);
  CHECK(r["result"]["content"][0]["text"] ==
        "Invalid arguments for test_echo: arguments.count: number out of range");
  r = answer(R"({"jsonrpc":"2.0","id":"two","method":"tools/call",)"
             R"("params":{"name":"test_echo","arguments":{"items":[{"n":-1e999}]}}})");
  CHECK(r["id"] == "two");
  CHECK(r["result"]["content"][0]["text"] ==
        "Invalid arguments for test_echo: arguments.items[0].n: number out of range");
  // Elsewhere in a request's params: invalid params, with its id.
  r = answer(R"({"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":1e400}})");
  CHECK(r["id"] == 3);
  CHECK(r["error"]["code"] == -32602);
  CHECK(r["error"]["message"] == "Invalid params: params.x: number out of range");
  r = answer(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_echo",)"
             R"("arguments":{},"_meta":{"progressToken":1e400}}})");
  CHECK(r["id"] == 4);
  CHECK(r["error"]["message"] == "Invalid params: params._meta.progressToken: number out of range");
  // Elsewhere in the message: an invalid request, with its id when it could be read.
  r = answer(R"({"jsonrpc":"2.0","id":5,"method":"ping","x":[1e400]})");
  CHECK(r["id"] == 5);
  CHECK(r["error"]["code"] == -32600);
  CHECK(r["error"]["message"] == "Invalid Request: x[0]: number out of range");
  r = answer(R"({"jsonrpc":"2.0","id":1e400,"method":"ping"})");
  CHECK(r["id"].is_null());
  CHECK(r["error"]["code"] == -32600);
  CHECK(r["error"]["message"] == "Invalid Request: id: number out of range");
  r = answer("-1e400");
  CHECK(r["id"].is_null());
  CHECK(r["error"]["code"] == -32600);
  // The usual answers come first: an unknown method or tool.
  CHECK(
      answer(R"({"jsonrpc":"2.0","id":6,"method":"nope","params":{"x":1e400}})")["error"]["code"] ==
      -32601);
  CHECK(answer(R"({"jsonrpc":"2.0","id":7,"method":"tools/call",)"
               R"("params":{"name":"nope","arguments":{"x":1e400}}})")["error"]["message"] ==
        "Unknown tool: nope");
  // A notification is never answered.
  s.SendLine(R"({"jsonrpc":"2.0","method":"notifications/cancelled",)"
             R"("params":{"requestId":1e400}})");
  CHECK(s.Call(8, "ping")["result"] == json::object());
}

TEST_CASE("a number no double holds in a batch fails only its own message", "[mcp][batch]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-03-26");
  s.SendLine(R"([{"jsonrpc":"2.0","id":1,"method":"tools/call",)"
             R"("params":{"name":"test_echo","arguments":{"count":1e400}}},)"
             R"({"jsonrpc":"2.0","id":2,"method":"tools/call",)"
             R"("params":{"name":"test_echo","arguments":{"count":2}}},)"
             R"({"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":-1e400}}])");
  json batch = s.Read();
  REQUIRE(batch.is_array());
  REQUIRE(batch.size() == 3);
  CHECK(batch[0]["id"] == 1);
  CHECK(batch[0]["result"]["content"][0]["text"] ==
        "Invalid arguments for test_echo: arguments.count: number out of range");
  CHECK(batch[1]["result"]["content"][0]["text"] == R"({"echo":{"count":2}})");
  CHECK(batch[2]["id"] == 3);
  CHECK(batch[2]["error"]["message"] == "Invalid params: params.a: number out of range");
}

TEST_CASE("a nesting bomb is rejected and the next request is answered", "[mcp][limits]") {
  PipeSession s(MakeServer());
  s.SendLine(std::string(100000, '[') + std::string(100000, ']'));
  json e = s.Read();
  CHECK(e["error"]["code"] == -32600);
  CHECK(e["id"].is_null());
  CHECK(s.Call(1, "ping")["result"] == json::object());
}

TEST_CASE("a line over 8 MiB is rejected and the next request is answered", "[mcp][limits]") {
  PipeSession s(MakeServer());
  std::thread writer([&] {
    s.SendLine(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" +
               std::string(9u * 1024u * 1024u, 'x') + "\"}}");
    s.Send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}});
  });
  json e = s.Read(10s);
  writer.join();
  CHECK(e["error"]["code"] == -32600);
  CHECK(e["id"].is_null());
  CHECK(s.Read()["id"] == 2);
}

TEST_CASE("batches are accepted only on 2025-03-26", "[mcp][batch]") {
  SECTION("2025-03-26 answers every request in an array, leaving notifications out") {
    PipeSession s(MakeServer());
    s.Initialize("2025-03-26");
    s.Send(json::parse(R"([{"jsonrpc":"2.0","id":1,"method":"ping"},
                   {"jsonrpc":"2.0","method":"notifications/x"},
                   {"jsonrpc":"2.0","id":2,"method":"tools/call",
                    "params":{"name":"test_echo","arguments":{"flag":true}}},
                   {"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}])"));
    json batch = s.Read();
    REQUIRE(batch.is_array());
    REQUIRE(batch.size() == 3);
    CHECK(batch[0]["id"] == 1);
    CHECK(batch[1]["result"]["content"][0]["text"] == R"({"echo":{"flag":true}})");
    CHECK(batch[2]["error"]["code"] == -32600);
    s.SendLine("[]");
    CHECK(s.Read()["error"]["code"] == -32600);
    s.SendLine(R"([{"jsonrpc":"2.0","method":"notifications/x"}])");
    CHECK(s.Call(4, "ping")["id"] == 4);  // a notification-only batch sends nothing
  }
  SECTION("other versions answer -32600") {
    for (const char* version : {"2024-11-05", "2025-06-18", "2025-11-25"}) {
      PipeSession s(MakeServer());
      s.Initialize(version);
      s.SendLine(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
      json e = s.Read();
      CHECK(e["error"]["code"] == -32600);
      CHECK(e["id"].is_null());
    }
  }
}

TEST_CASE("tools/list shapes tool fields by version", "[mcp][tools]") {
  for (const char* version : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}) {
    PipeSession s(MakeServer());
    s.Initialize(version);
    json list = s.Call(1, "tools/list");
    REQUIRE(list["result"]["tools"].size() == 3);
    CHECK_FALSE(list["result"].contains("nextCursor"));
    json sleep = FindTool(list, "test_sleep");
    json echo = FindTool(list, "test_echo");
    CHECK(sleep["inputSchema"]["type"] == "object");
    const std::string v = version;
    CHECK(echo.contains("annotations") == (v >= "2025-03-26"));
    CHECK(sleep.contains("title") == (v >= "2025-06-18"));
    CHECK(sleep.contains("outputSchema") == (v >= "2025-06-18"));
    CHECK(s.Call(2, "tools/list", {{"cursor", "bogus"}})["error"]["code"] == -32602);
  }
}

TEST_CASE("tools/call returns structuredContent and the same JSON as text", "[mcp][tools]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  json r = CallTool(s, 1, "test_echo", {{"mode", "a"}, {"count", 2}});
  json result = r["result"];
  CHECK_FALSE(result.contains("isError"));
  CHECK(result["structuredContent"] == json{{"echo", {{"mode", "a"}, {"count", 2}}}});
  CHECK(json::parse(result["content"][0]["text"].get<std::string>()) ==
        result["structuredContent"]);

  PipeSession old(MakeServer());
  old.Initialize("2025-03-26");
  json r2 = CallTool(old, 1, "test_echo", {{"mode", "a"}});
  CHECK_FALSE(r2["result"].contains("structuredContent"));
  CHECK(r2["result"]["content"][0]["text"] == R"({"echo":{"mode":"a"}})");
}

TEST_CASE("invalid tool input is a tool error naming the field", "[mcp][tools][schema]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  json r = CallTool(s, 1, "test_sleep", {{"ms", "x"}});
  CHECK(r["result"]["isError"] == true);
  CHECK(r["result"]["content"][0]["text"] ==
        "Invalid arguments for test_sleep: arguments.ms: expected integer, got string");
  CHECK_FALSE(r["result"].contains("structuredContent"));
  r = CallTool(s, 2, "test_sleep", json::object());
  CHECK(r["result"]["content"][0]["text"].get<std::string>().find("arguments.ms: is required") !=
        std::string::npos);
  r = CallTool(s, 3, "test_echo", {{"items", {{{"role", "robot"}}}}});
  CHECK(r["result"]["content"][0]["text"].get<std::string>().find("arguments.items[0].role") !=
        std::string::npos);
  r = s.Call(4, "tools/call", {{"name", "test_echo"}, {"arguments", "nope"}});
  CHECK(r["error"]["code"] == -32602);
  r = s.Call(5, "tools/call", {{"arguments", json::object()}});
  CHECK(r["error"]["code"] == -32602);
}

TEST_CASE("an unknown tool is -32602 and a throwing tool is a tool error", "[mcp][tools]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  json r = CallTool(s, 1, "nope", json::object());
  CHECK(r["error"]["code"] == -32602);
  CHECK(r["error"]["message"] == "Unknown tool: nope");
  r = CallTool(s, 2, "test_echo", {{"text", "throw"}});
  CHECK(r["result"]["isError"] == true);
  CHECK(r["result"]["content"][0]["text"] == "test_echo failed: internal error");
  CHECK(s.Call(3, "ping")["id"] == 3);
}

TEST_CASE("a cancelled call stops its work and sends no response", "[mcp][cancel]") {
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25");
  s.Send({{"jsonrpc", "2.0"},
          {"id", 10},
          {"method", "tools/call"},
          {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 60000}}}}}});
  std::this_thread::sleep_for(50ms);
  s.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 10}, {"reason", "user"}}}});
  // Answers keep flowing while the call winds down, and no response for id 10 ever comes.
  CHECK(s.Call(11, "ping")["id"] == 11);
  auto line = s.ReadLine(300ms);
  CHECK_FALSE(line.has_value());
  const auto start = std::chrono::steady_clock::now();
  CHECK(s.Finish() == 0);
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("long calls cancelled one after another: every ping is answered at once",
          "[mcp][cancel]") {
  // Each long call is answered by the thread that read it, and the standby reads on; the next
  // call comes while the cancelled one winds down, on the thread that now reads.
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25");
  for (int i = 0; i < 20; ++i) {
    INFO("call " << i);
    s.Send({{"jsonrpc", "2.0"},
            {"id", i},
            {"method", "tools/call"},
            {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 60000}}}}}});
    s.Send({{"jsonrpc", "2.0"}, {"id", "p" + std::to_string(i)}, {"method", "ping"}});
    json pong = s.Read(1s);
    REQUIRE(pong["id"] == "p" + std::to_string(i));
    s.Send({{"jsonrpc", "2.0"},
            {"method", "notifications/cancelled"},
            {"params", {{"requestId", i}, {"reason", "user"}}}});
  }
  CHECK(s.Call("last", "ping")["id"] == "last");
  CHECK_FALSE(s.ReadLine(200ms).has_value());  // no answer for any cancelled call
  CHECK(s.Finish() == 0);
}

TEST_CASE("concurrent calls run in parallel and each gets its own answer", "[mcp][tools]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  s.Send({{"jsonrpc", "2.0"},
          {"id", "slow"},
          {"method", "tools/call"},
          {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 300}}}}}});
  json fast = CallTool(s, "fast", "test_echo", {{"flag", false}});
  CHECK(fast["result"]["structuredContent"]["echo"]["flag"] == false);
  json slow = s.Read();
  CHECK(slow["id"] == "slow");
  CHECK(slow["result"]["structuredContent"]["slept_ms"] >= 300);
}

TEST_CASE("several messages in one write: every call answered, a ping at once", "[mcp][tools]") {
  // The reading thread keeps the chunk's first call (the standby reads on if it runs long);
  // the chunk's other calls go to pooled threads, and the ping is answered while they run.
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25");
  const json a{{"jsonrpc", "2.0"},
               {"id", "a"},
               {"method", "tools/call"},
               {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 200}}}}}};
  const json b{{"jsonrpc", "2.0"},
               {"id", "b"},
               {"method", "tools/call"},
               {"params", {{"name", "test_echo"}, {"arguments", {{"flag", true}}}}}};
  const json ping{{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}};
  s.SendLine(a.dump() + "\n" + b.dump() + "\n" + ping.dump());
  std::map<std::string, json> answers;
  for (int i = 0; i < 3; ++i) {
    json r = s.Read();
    REQUIRE(r.contains("id"));
    answers[r["id"].get<std::string>()] = r;
  }
  CHECK(answers["p"]["result"] == json::object());
  CHECK(answers["b"]["result"]["structuredContent"]["echo"]["flag"] == true);
  CHECK(answers["a"]["result"]["structuredContent"]["slept_ms"] >= 200);
  // The ping and the echo did not wait for the sleep.
  CHECK(s.Call("after", "ping")["id"] == "after");
}

TEST_CASE("a call and its cancellation in one write: no answer, and the session goes on",
          "[mcp][cancel]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  const json call{{"jsonrpc", "2.0"},
                  {"id", 7},
                  {"method", "tools/call"},
                  {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 60000}}}}}};
  const json cancel{{"jsonrpc", "2.0"},
                    {"method", "notifications/cancelled"},
                    {"params", {{"requestId", 7}, {"reason", "user"}}}};
  s.SendLine(call.dump() + "\n" + cancel.dump());
  CHECK(s.Call(8, "ping")["id"] == 8);
  CHECK_FALSE(s.ReadLine(300ms).has_value());
  const auto start = std::chrono::steady_clock::now();
  CHECK(s.Finish() == 0);
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("a thousand calls back to back, one and two per write, each answered once",
          "[mcp][tools]") {
  // The reading moves between threads: on every call with a hand-off delay of 0, and with the
  // standby whenever a call outlasts the delay (the second call of each pair sleeps 0-3 ms,
  // around the 2 ms delay, where the hand-back races the timer). The pool must not grow with
  // the number of calls, and no answer may be lost or doubled.
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25");
  int answered = 0;
  for (int i = 0; i < 1000; i += 2) {
    const json one{{"jsonrpc", "2.0"},
                   {"id", i},
                   {"method", "tools/call"},
                   {"params", {{"name", "test_echo"}, {"arguments", {{"flag", i % 4 == 0}}}}}};
    const json two{{"jsonrpc", "2.0"},
                   {"id", i + 1},
                   {"method", "tools/call"},
                   {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", (i / 2) % 4}}}}}};
    if (i % 4 == 0) {
      s.SendLine(one.dump() + "\n" + two.dump());
    } else {
      s.Send(one);
      s.Send(two);
    }
    std::set<int> ids;
    for (int k = 0; k < 2; ++k) {
      json r = s.Read();
      REQUIRE(r["id"].is_number_integer());
      ids.insert(r["id"].get<int>());
      if (r["id"].get<int>() == i) {
        CHECK(r["result"]["structuredContent"]["echo"]["flag"] == (i % 4 == 0));
      } else {
        CHECK(r["result"]["structuredContent"]["slept_ms"] == (i / 2) % 4);
      }
      ++answered;
    }
    CHECK(ids == std::set<int>{i, i + 1});
  }
  CHECK(answered == 1000);
  CHECK_FALSE(s.ReadLine(100ms).has_value());
  // Threads of this test process (the server's pool among them): a handful, not hundreds.
  size_t threads = 0;
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  for ([[maybe_unused]] const auto& entry : tasks) ++threads;
  CHECK(threads < 12);
  CHECK(s.Finish() == 0);
}

TEST_CASE("input that cannot be read ends Run() with 1", "[mcp][lifecycle]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int out[2];
  REQUIRE(pipe(out) == 0);
  close(fds[0]);  // not an open file any more: poll says POLLNVAL
  close(fds[1]);
  auto server = MakeServer();
  CHECK(server->Run(fds[0], out[1]) == 1);
  close(out[0]);
  close(out[1]);
}

TEST_CASE("end of input lets a short call finish and exits 0", "[mcp][lifecycle]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  s.Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "tools/call"},
          {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 100}}}}}});
  std::this_thread::sleep_for(20ms);
  CHECK(s.Finish() == 0);
  json r = s.Read(1s);
  CHECK(r["id"] == 1);
  CHECK(r["result"]["structuredContent"]["cancelled"] == false);
}

TEST_CASE("end of input cancels a long call and still exits within a second", "[mcp][lifecycle]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25");
  s.Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "tools/call"},
          {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 60000}}}}}});
  std::this_thread::sleep_for(20ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK(s.Finish() == 0);
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

namespace {

// Plays the client's side of an elicitation: reads the request, checks it, answers.
json Elicit(PipeSession& s, const std::string& version, const json& answer, json* request_out) {
  s.Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "tools/call"},
          {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "Save this?"}}}}}});
  json request = s.Read();
  if (request_out != nullptr) *request_out = request;
  if (request.contains("method") && request["method"] == "elicitation/create") {
    json reply{{"jsonrpc", "2.0"}, {"id", request["id"]}};
    if (answer.contains("error")) {
      reply["error"] = answer["error"];
    } else {
      reply["result"] = answer;
    }
    s.Send(reply);
    json response = s.Read();
    (void)version;
    return response["result"]["structuredContent"];
  }
  return request["result"]["structuredContent"];
}

}  // namespace

TEST_CASE("elicitation round trips through the reader while the call waits", "[mcp][elicitation]") {
  SECTION("accept, decline and cancel on 2025-11-25 with mode form") {
    for (const char* action : {"accept", "decline", "cancel"}) {
      PipeSession s(MakeServer());
      s.Initialize("2025-11-25", {{"elicitation", json::object()}});
      json answer{{"action", action}};
      if (std::string(action) == "accept") answer["content"] = {{"confirm", true}};
      json request;
      json out = Elicit(s, "2025-11-25", answer, &request);
      CHECK(request["method"] == "elicitation/create");
      CHECK(request["id"].is_string());
      CHECK(request["params"]["mode"] == "form");
      CHECK(request["params"]["message"] == "Save this?");
      CHECK(request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean");
      CHECK(out["outcome"] == action);
      if (std::string(action) == "accept") CHECK(out["content"]["confirm"] == true);
    }
  }
  SECTION("2025-06-18 sends no mode field and no property defaults") {
    PipeSession s(MakeServer());
    s.Initialize("2025-06-18", {{"elicitation", json::object()}});
    json request;
    json out = Elicit(s, "2025-06-18", {{"action", "decline"}}, &request);
    CHECK_FALSE(request["params"].contains("mode"));
    CHECK_FALSE(request["params"]["requestedSchema"]["properties"]["confirm"].contains("default"));
    CHECK(out["outcome"] == "decline");
  }
  SECTION("a client without the capability never receives the request") {
    PipeSession s(MakeServer());
    s.Initialize("2025-11-25");
    json out = Elicit(s, "2025-11-25", {}, nullptr);
    CHECK(out["outcome"] == "unsupported");
  }
  SECTION("url-only elicitation is not form elicitation") {
    PipeSession s(MakeServer());
    s.Initialize("2025-11-25", {{"elicitation", {{"url", json::object()}}}});
    CHECK(Elicit(s, "2025-11-25", {}, nullptr)["outcome"] == "unsupported");
  }
  SECTION("a version without elicitation never sends it") {
    PipeSession s(MakeServer());
    s.Initialize("2025-03-26", {{"elicitation", json::object()}});
    s.Send({{"jsonrpc", "2.0"},
            {"id", 1},
            {"method", "tools/call"},
            {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "x"}}}}}});
    json r = s.Read();
    CHECK(r["id"] == 1);
    CHECK(json::parse(r["result"]["content"][0]["text"].get<std::string>())["outcome"] ==
          "unsupported");
  }
  SECTION("a JSON-RPC error or a bad action is an error, never an accept") {
    PipeSession s(MakeServer());
    s.Initialize("2025-11-25", {{"elicitation", json::object()}});
    json out = Elicit(s, "2025-11-25", {{"error", {{"code", -32601}, {"message", "no"}}}}, nullptr);
    CHECK(out["outcome"] == "error");
    PipeSession t(MakeServer());
    t.Initialize("2025-11-25", {{"elicitation", json::object()}});
    CHECK(Elicit(t, "2025-11-25", {{"action", "sure"}}, nullptr)["outcome"] == "error");
  }
  SECTION("accepted content that does not match the form is an error") {
    for (const json& content : {json{{"confirm", "yes"}}, json::object()}) {
      PipeSession s(MakeServer());
      s.Initialize("2025-11-25", {{"elicitation", json::object()}});
      json out = Elicit(s, "2025-11-25", {{"action", "accept"}, {"content", content}}, nullptr);
      CHECK(out["outcome"] == "error");
      CHECK(out["error"].get<std::string>().find("content.confirm") != std::string::npos);
    }
    PipeSession s(MakeServer());
    s.Initialize("2025-11-25", {{"elicitation", json::object()}});
    CHECK(Elicit(s, "2025-11-25", {{"action", "accept"}}, nullptr)["outcome"] == "error");
  }
}

TEST_CASE("an elicitation answer holding a number no double holds is an error answer",
          "[mcp][elicitation]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  s.Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "tools/call"},
          {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "Save this?"}}}}}});
  json request = s.Read();
  REQUIRE(request["method"] == "elicitation/create");
  s.SendLine(R"({"jsonrpc":"2.0","id":)" + request["id"].dump() +
             R"(,"result":{"action":"accept","content":{"confirm":true,"n":1e400}}})");
  json response = s.Read();
  CHECK(response["id"] == 1);
  CHECK(response["result"]["structuredContent"]["outcome"] == "error");
}

TEST_CASE("an elicitation answer and a new call in one write are both handled",
          "[mcp][elicitation]") {
  // The answer is routed by the reading thread to the waiting call; the new call, read in the
  // same chunk, is answered too (by the thread that read it, once the chunk is handled).
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  s.Send({{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "tools/call"},
          {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "Save this?"}}}}}});
  json request = s.Read();
  REQUIRE(request["method"] == "elicitation/create");
  const json reply{{"jsonrpc", "2.0"},
                   {"id", request["id"]},
                   {"result", {{"action", "accept"}, {"content", {{"confirm", true}}}}}};
  const json next{{"jsonrpc", "2.0"},
                  {"id", 2},
                  {"method", "tools/call"},
                  {"params", {{"name", "test_echo"}, {"arguments", {{"flag", true}}}}}};
  s.SendLine(reply.dump() + "\n" + next.dump());
  std::map<int, json> answers;
  for (int i = 0; i < 2; ++i) {
    json r = s.Read();
    REQUIRE(r["id"].is_number_integer());
    answers[r["id"].get<int>()] = r["result"]["structuredContent"];
  }
  CHECK(answers[1]["outcome"] == "accept");
  CHECK(answers[1]["content"]["confirm"] == true);
  CHECK(answers[2]["echo"]["flag"] == true);
}

TEST_CASE("back-to-back elicitations: each waiting call gets its answer read",
          "[mcp][elicitation]") {
  // The thread that reads a call answers it; while the call waits for its elicitation answer,
  // a standby takes the reading over. The next call comes as soon as the previous answer is
  // out, so the thread that answered it is still finishing while the new reader starts the
  // next call: the previous one must leave the new call's hand-off alone, or nobody reads the
  // next elicitation answer and the call waits for its 30 s timeout.
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  for (int i = 1; i <= 300; ++i) {
    INFO("call " << i);
    s.Send({{"jsonrpc", "2.0"},
            {"id", i},
            {"method", "tools/call"},
            {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "?"}}}}}});
    json request = s.Read(10s);
    REQUIRE(request["method"] == "elicitation/create");
    s.Send({{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", {{"action", "decline"}}}});
    json r = s.Read(10s);
    REQUIRE(r["id"] == i);
    REQUIRE(r["result"]["structuredContent"]["outcome"] == "decline");
  }
}

TEST_CASE("a long call does not hold up the input: a ping is answered while it runs",
          "[mcp][tools]") {
  // The reading thread answers the call itself; a standby takes the reading over when the call
  // runs long, so the ping is read and answered long before the call ends.
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25");
  s.Send({{"jsonrpc", "2.0"},
          {"id", "slow"},
          {"method", "tools/call"},
          {"params", {{"name", "test_sleep"}, {"arguments", {{"ms", 3000}}}}}});
  std::this_thread::sleep_for(50ms);
  s.Send({{"jsonrpc", "2.0"}, {"id", "ping"}, {"method", "ping"}});
  json first = s.Read(2s);  // well before the call's 3 s
  CHECK(first["id"] == "ping");
  json second = s.Read(5s);
  CHECK(second["id"] == "slow");
}

TEST_CASE("cancelling a call mid-elicitation cancels the elicitation too", "[mcp][elicitation]") {
  PipeSession s(MakeServer(HandOffDelay()));
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  s.Send({{"jsonrpc", "2.0"},
          {"id", 5},
          {"method", "tools/call"},
          {"params", {{"name", "test_elicit"}, {"arguments", {{"message", "?"}}}}}});
  json request = s.Read();
  REQUIRE(request["method"] == "elicitation/create");
  s.Send(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 5}}}});
  json notice = s.Read();
  CHECK(notice["method"] == "notifications/cancelled");
  CHECK(notice["params"]["requestId"] == request["id"]);
  CHECK_FALSE(s.ReadLine(200ms).has_value());  // no response to the cancelled call
}

TEST_CASE("an unanswered elicitation times out", "[mcp][elicitation]") {
  PipeSession s(MakeServer());
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  s.Send({{"jsonrpc", "2.0"},
          {"id", 5},
          {"method", "tools/call"},
          {"params",
           {{"name", "test_elicit"}, {"arguments", {{"message", "?"}, {"timeout_ms", 100}}}}}});
  CHECK(s.Read()["method"] == "elicitation/create");
  CHECK(s.Read()["method"] == "notifications/cancelled");
  json r = s.Read();
  CHECK(r["id"] == 5);
  CHECK(r["result"]["structuredContent"]["outcome"] == "error");
  CHECK(r["result"]["structuredContent"]["error"].get<std::string>().rfind("timeout", 0) == 0);
}
