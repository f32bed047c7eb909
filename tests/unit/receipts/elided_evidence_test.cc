// A recall answer read with its evidence elided (ElidedMember) against the same answer built
// whole: the reader must accept and refuse exactly the same texts, give the same value but for
// the evidence ({}), and the receipt's watermarks must be those the walk of the whole value
// finds. Random answers (fixed seed) with the watermark keys at random places, members in
// random order, escaped and repeated keys, then the same texts damaged byte by byte.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "receipts/receipts.h"

using json = nlohmann::json;
using tmcra::ElidedMember;
using tmcra::JsonReadResult;
using tmcra::ReadJsonStrict;
using tmcra::receipts::WatermarkKeys;
using tmcra::receipts::Watermarks;

namespace {

constexpr size_t kDepth = 12;  // the reader's cap in these tests

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Keys as written in the text: watermark keys (more often), plain ones, one that only its
  // escape spells as another ("a\u0062" is "ab"), non-ASCII, and ones that sort around them.
  std::string Key() {
    static const std::vector<std::string> keys = {"\"source_event_seq\"",
                                                  "\"promoted_event_seq\"",
                                                  "\"indexed_event_seq\"",
                                                  "\"source_raw_token_estimate\"",
                                                  "\"source_event_seq\"",
                                                  "\"a\"",
                                                  "\"ab\"",
                                                  "\"a\\u0062\"",
                                                  "\"snapshot\"",
                                                  "\"windows\"",
                                                  "\"\xc3\xa9t\xc3\xa9\"",
                                                  "\"Z\"",
                                                  "\"\""};
    return keys[Pick(keys.size())];
  }

  std::string Scalar() {
    switch (Pick(10)) {
      case 0:
        return std::to_string(static_cast<int64_t>(Pick(1000)) - 500);
      case 1:
        return "18446744073709551615";
      case 2:
        return "-9223372036854775808";
      case 3:
        return "123456789012345678901234567890";  // a double
      case 4:
        return "1.5";
      case 5:
        return "2e3";
      case 6:
        return Pick(2) ? "true" : "false";
      case 7:
        return "null";
      case 8:
        return "\"x\\n\\u00e9\\ud83d\\ude00\"";
      default:
        return std::to_string(Pick(100000));
    }
  }

  // Whitespace, often none.
  std::string Ws() {
    static const char* spaces[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
    return spaces[Pick(std::size(spaces))];
  }

  // Nesting up to six levels, or in one answer of eight up to the reader's cap and past it.
  std::string Value(size_t depth) {
    if (depth >= limit_ || Pick(deep_ ? 8 : 3) == 0) return Scalar();
    if (Pick(3) == 0) {
      std::string out = "[" + Ws();
      const size_t n = Pick(4);
      for (size_t i = 0; i < n; ++i) out += (i ? "," + Ws() : "") + Value(depth + 1) + Ws();
      return out + "]";
    }
    return Object(depth);
  }

  std::string Object(size_t depth) {
    std::string out = "{" + Ws();
    const size_t n = Pick(5);
    for (size_t i = 0; i < n; ++i) {
      out += (i ? "," + Ws() : "") + Key() + Ws() + ":" + Ws() + Value(depth + 1) + Ws();
    }
    return out + "}";
  }

  // A recall answer's shape: top-level members in random order, evidence among them.
  std::string Answer() {
    deep_ = Pick(8) == 0;
    limit_ = deep_ ? kDepth + 2 : 6;
    std::vector<std::string> members = {"\"query_id\":\"q\"", "\"scope_name\":\"s\"",
                                        "\"source_event_seq\":" + Scalar(), "\"zeta\":" + Value(1),
                                        "\"debug\":" + Value(1)};
    switch (Pick(8)) {
      case 0:
        members.push_back("\"evidence\":" + Value(2));
        break;  // any kind
      case 1:
        break;  // none
      default:
        members.push_back("\"evidence\":" + Object(1));
    }
    std::shuffle(members.begin(), members.end(), rng_);
    std::string out = "{";
    for (size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + members[i];
    return out + "}";
  }

 private:
  std::mt19937 rng_;
  bool deep_ = false;
  size_t limit_ = 6;
};

struct Read {
  JsonReadResult result;
  json value;
};

Read Whole(const std::string& text) {
  Read r;
  r.result = ReadJsonStrict(text, r.value, kDepth);
  return r;
}

// `fall_back`: the reader may have read the evidence whole after all (too much work to pick
// the watched integers); then the value is the whole one.
void CheckSame(const std::string& text, bool fall_back = false) {
  INFO(text.substr(0, 2000));
  const Read whole = Whole(text);
  ElidedMember elide{"evidence", WatermarkKeys()};
  elide.elided = true;  // as a previous read left it: every output is reset first
  elide.found = {1, 2, 3, 4};
  json elided_value;
  const JsonReadResult elided = ReadJsonStrict(text, elided_value, kDepth, &elide);
  REQUIRE(elided.ok == whole.result.ok);
  REQUIRE(elided.duplicate_key == whole.result.duplicate_key);
  REQUIRE(elided.too_deep == whole.result.too_deep);
  REQUIRE(elided.number_out_of_range == whole.result.number_out_of_range);
  REQUIRE(elided.number_paths == whole.result.number_paths);
  if (!whole.result.ok) return;
  const bool object_evidence = whole.value.is_object() && whole.value.contains("evidence") &&
                               whole.value["evidence"].is_object();
  REQUIRE(elide.elided == (object_evidence && !fall_back));
  json expected = whole.value;
  if (elide.elided) expected["evidence"] = json::object();
  REQUIRE(elided_value == expected);
  const json* node = elide.elided ? &elided_value["evidence"] : nullptr;
  REQUIRE(Watermarks(elided_value, node, &elide) == Watermarks(whole.value));
}

}  // namespace

TEST_CASE("an elided evidence reads like the whole one: random answers", "[receipts][elide]") {
  Generator gen(20261130);
  size_t elided = 0;
  size_t too_deep = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = gen.Answer();
    CheckSame(text);
    json v;
    const JsonReadResult r = ReadJsonStrict(text, v, kDepth);
    if (r.ok && v.contains("evidence") && v["evidence"].is_object()) ++elided;
    if (r.too_deep) ++too_deep;
  }
  CHECK(elided > 500);   // many answers had an evidence object to elide (and no repeated key)
  CHECK(too_deep > 20);  // and some went past the depth cap
}

TEST_CASE("an elided evidence reads like the whole one: damaged answers", "[receipts][elide]") {
  Generator gen(7);
  const std::string damage[] = {"",     "\"",   "{", "}", "[", "]", ",", ":",   "\\",     "\x01",
                                "\xff", "\xc3", "1", "-", ".", "e", "n", "\\u", "\\ud800"};
  for (int i = 0; i < 1500; ++i) {
    std::string text = gen.Answer();
    const size_t at = gen.Pick(text.size());
    switch (gen.Pick(3)) {
      case 0:
        text.erase(at, 1 + gen.Pick(3));
        break;
      case 1:
        text.insert(at, damage[gen.Pick(std::size(damage))]);
        break;
      default:
        text[at] = damage[1 + gen.Pick(std::size(damage) - 1)][0];
    }
    CheckSame(text);
  }
}

TEST_CASE("an elided evidence: repeated keys, depth and order, one by one", "[receipts][elide]") {
  // A key repeated in any object of the evidence, spelt alike or only equal once decoded.
  CheckSame(R"({"evidence":{"a":{"x":1,"y":2,"x":3}},"query_id":"q"})");
  CHECK_FALSE(Whole(R"({"evidence":{"a":{"ab":1,"a\u0062":2}}})").result.ok);
  CheckSame(R"({"evidence":{"a":{"ab":1,"a\u0062":2}}})");
  CheckSame(R"({"evidence":{"a":{"x":1},"b":{"x":1}}})");  // the same key in two objects: fine
  // An object past the keys that are searched one by one (then a set of them is kept).
  std::string many = R"({"evidence":{"w":{)";
  for (int i = 0; i < 40; ++i) many += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  CheckSame(many + R"("k\u0037":0}}})");  // "k7" again
  CHECK_FALSE(Whole(many + R"("k\u0037":0}}})").result.ok);
  CheckSame(many + R"("k40":0}}})");
  CHECK(Whole(many + R"("k40":0}}})").result.ok);
  // Nested past the cap inside the evidence, and just at it.
  std::string deep = R"({"evidence":)";
  for (size_t i = 1; i < kDepth; ++i) deep += "[";
  deep += "0";
  for (size_t i = 1; i < kDepth; ++i) deep += "]";
  CheckSame(deep + "}");
  CheckSame(R"({"evidence":)" + std::string(kDepth, '[') + std::string(kDepth, ']') + "}");
  // The walk's order, not the text's: "a" sorts before "b", so a's value wins although b's
  // comes first in the text; an object's own key comes before its members' keys; an array's
  // elements in index order; a float or a bool is no integer.
  const std::string text =
      R"({"evidence":{"b":{"source_event_seq":1},"a":[{"z":{"source_event_seq":2}},)"
      R"({"source_event_seq":3}],"promoted_event_seq":true,)"
      R"("c":{"promoted_event_seq":4.0,"d":{"promoted_event_seq":5}}},"query_id":"q"})";
  CheckSame(text);
  ElidedMember elide{"evidence", WatermarkKeys()};
  json value;
  REQUIRE(ReadJsonStrict(text, value, kDepth, &elide).ok);
  REQUIRE(elide.elided);
  CHECK(elide.found[0] == 2);
  CHECK(elide.found[1] == 5);
  CHECK(elide.found[2].is_null());
  // A number no double holds is named by the same path, inside the evidence or not.
  CheckSame(R"({"evidence":{"w":[{"k":1,"x":-1e400}]},"query_id":"q"})");
  CHECK(Whole(R"({"evidence":{"w":[{"k":1,"x":-1e400}]}})").result.number_paths ==
        std::vector<json>{json::array({"evidence", "w", 0, "x"})});
  CheckSame(R"({"evidence":{"a":[1,[2,1e999]]},"z":1e400})");
  CheckSame(R"({"query_id":1e400,"evidence":{"a":1}})");
  // Only a top-level member is elided.
  CheckSame(R"({"x":{"evidence":{"source_event_seq":9}}})");
  // The sixteenth key of an object starts the set of its keys: it must be in it.
  std::string sixteen = R"({"evidence":{)";
  for (int i = 0; i < 16; ++i) sixteen += "\"k" + std::to_string(i) + "\":0,";
  CheckSame(sixteen + R"("k15":1}})");
  CHECK(Whole(sixteen + R"("k15":1}})").result.duplicate_key);
  // An elided object nested just to the cap, and one level past it.
  for (const size_t levels : {kDepth - 1, kDepth}) {
    std::string nested = R"({"evidence":)";
    for (size_t i = 0; i < levels; ++i) nested += R"({"a":)";
    nested += "1";
    for (size_t i = 0; i < levels; ++i) nested += "}";
    CheckSame(nested + "}");
    CHECK(Whole(nested + "}").result.too_deep == (levels == kDepth));
  }
}

TEST_CASE("an elided evidence too costly to search is read whole instead", "[receipts][elide]") {
  // A long key above many candidates: comparing their paths would take time quadratic in the
  // text; past a budget the reader reads the member whole, and the result is the same.
  std::string text = R"({"evidence":{")" + std::string(200'000, 'a') + R"(":[)";
  for (int i = 0; i < 2000; ++i) text += (i ? "," : "") + std::string(R"({"source_event_seq":1})");
  text += R"(]},"query_id":"q"})";
  CheckSame(text, /*fall_back=*/true);
  // The same shape with a short key is elided.
  std::string small = R"({"evidence":{"a":[)";
  for (int i = 0; i < 2000; ++i) small += (i ? "," : "") + std::string(R"({"source_event_seq":1})");
  small += R"(]},"query_id":"q"})";
  CheckSame(small);
}
