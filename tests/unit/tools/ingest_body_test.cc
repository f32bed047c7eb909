#include "src/tools/ingest_body.h"

#include <catch2/catch.hpp>
#include <fstream>

using json = nlohmann::json;
using tmcra::tools::BuildIngestBody;
using tmcra::tools::DeriveIdempotencyKey;

namespace {

std::vector<json> Vectors() {
  std::ifstream in(std::string(TMCRA_TEST_DATA_DIR) + "/vectors/idempotency-keys.jsonl");
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

}  // namespace

TEST_CASE("derived keys match TMCRA's vectors", "[tools][ingest]") {
  for (const auto& v : Vectors()) {
    CHECK(DeriveIdempotencyKey(v["scope"].get<std::string>(), v["body"]) == v["key"]);
  }
}

TEST_CASE("the ingest body is built exactly as TMCRA's client builds it", "[tools][ingest]") {
  // The same call TMCRA's client turned into the second vector's body.
  const json args = json::parse(R"({
    "session_id": "会话-7",
    "messages": [
      {"message_id": "u1", "role": "user", "content": "本番のポートは 8123 です",
       "timestamp": "2026-11-01T10:00:00Z", "target_agent_id": "codex"},
      {"message_id": "a1", "role": "assistant", "content": "了解 🚀",
       "timestamp": "2026-11-01T10:00:05.25+00:00"}],
    "consistency": "read_your_writes", "slow_policy": "deferred", "agent_id": "codex"})");
  auto body = BuildIngestBody(args, {"codex", "tool_argument", "1.0.0rc1"}, "unused");
  REQUIRE(body);
  const json vector = Vectors().at(1);
  CHECK(*body == vector["body"]);
  CHECK(DeriveIdempotencyKey("proj.alpha", *body) == vector["key"]);
}

TEST_CASE("ingest body rules for agents and timestamps", "[tools][ingest]") {
  const auto build = [](const char* text) {
    return BuildIngestBody(json::parse(text), {std::nullopt, "configured_default", "0"},
                           "2026-01-01T00:00:00Z");
  };
  auto user_agent = build(
      R"({"session_id":"s","messages":[{"message_id":"m","role":"user","content":"x","agent_id":"a"}]})");
  REQUIRE_FALSE(user_agent);
  CHECK(user_agent.error().message ==
        "arguments.messages[0].agent_id: user messages use target_agent_id, not agent_id");
  auto target = build(
      R"({"session_id":"s","messages":[{"message_id":"m","role":"tool","content":"x","target_agent_id":"a"}]})");
  REQUIRE_FALSE(target);
  CHECK(target.error().message.find("arguments.messages[0].target_agent_id") == 0);
  auto bad_ts = build(
      R"({"session_id":"s","messages":[{"message_id":"m","role":"user","content":"x","timestamp":"soon"}]})");
  REQUIRE_FALSE(bad_ts);
  CHECK(bad_ts.error().message.find("arguments.messages[0].timestamp") == 0);
  auto bad_agent = build(
      R"({"session_id":"s","messages":[{"message_id":"m","role":"assistant","content":"x","agent_id":"has space"}]})");
  REQUIRE_FALSE(bad_agent);
  auto ok = build(
      R"({"session_id":" s ","messages":[{"message_id":" m ","role":"system","content":" x ","timestamp":"2026-07-15T09:00:00+09:00"}]})");
  REQUIRE(ok);
  CHECK((*ok)["session_id"] == "s");
  CHECK((*ok)["messages"][0]["message_id"] == "m");
  CHECK((*ok)["messages"][0]["content"] == "x");
  CHECK((*ok)["messages"][0]["timestamp"] == "2026-07-15T09:00:00+09:00");
  CHECK((*ok)["messages"][0]["metadata"] == json{{"actor_role", "system"}});
  CHECK((*ok)["consistency"] == "eventual");
  CHECK_FALSE((*ok)["metadata"].contains("agent_id"));
}
