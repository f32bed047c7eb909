#include "base/canonical_json.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "base/sha256.h"

namespace {

using json = nlohmann::json;

std::vector<json> LoadJsonl(const std::string& name) {
  std::ifstream in(std::string(TMCRA_TEST_DATA_DIR) + "/" + name);
  REQUIRE(in.good());
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

}  // namespace

TEST_CASE("canonical JSON matches Python's json.dumps byte for byte", "[common][canonical]") {
  const auto rows = LoadJsonl("vectors/canonical-json.jsonl");
  REQUIRE(rows.size() >= 27);
  for (const auto& row : rows) {
    INFO(row["name"].get<std::string>());
    const std::string canonical = tmcra::CanonicalJson(row["value"]);
    CHECK(canonical == row["canonical"].get<std::string>());
    CHECK(tmcra::Sha256Hex(canonical) == row["canonical_utf8_sha256"].get<std::string>());
  }
}

TEST_CASE("idempotency keys derive from canonical {scope, body}", "[common][canonical]") {
  for (const auto& row : LoadJsonl("vectors/idempotency-keys.jsonl")) {
    const json wrapper{{"scope", row["scope"]}, {"body", row["body"]}};
    const std::string key =
        "mcp-ingest-" + tmcra::Sha256Hex(tmcra::CanonicalJson(wrapper)).substr(0, 40);
    CHECK(key == row["key"].get<std::string>());
    CHECK(key.size() == 51);
  }
}

TEST_CASE("floats are written as Python's repr", "[common][canonical]") {
  for (const auto& row : LoadJsonl("python-float-repr.jsonl")) {
    const double value = row["value"].get<double>();
    INFO(row["repr"].get<std::string>());
    CHECK(tmcra::PythonFloatRepr(value) == row["repr"].get<std::string>());
  }
  CHECK(tmcra::PythonFloatRepr(std::numeric_limits<double>::infinity()) == "Infinity");
  CHECK(tmcra::PythonFloatRepr(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(tmcra::CanonicalJson(json::parse(R"({"b":1.5,"a":[2.0]})")) == R"({"a":[2.0],"b":1.5})");
}

TEST_CASE("canonical JSON escapes controls and keeps the rest literal", "[common][canonical]") {
  CHECK(tmcra::CanonicalJson(json("\x01\x1f")) == "\"\\u0001\\u001f\"");
  CHECK(tmcra::CanonicalJson(json("\x7f")) == "\"\x7f\"");
  CHECK(tmcra::CanonicalJson(json("\xe2\x80\xa8")) == "\"\xe2\x80\xa8\"");
  CHECK(tmcra::CanonicalJson(json(18446744073709551615ull)) == "18446744073709551615");
}
