// ReadJsonStrict against nlohmann's json::parse: the same acceptance and the same value (type
// included) on edge cases, on random documents and on random mutations of them; duplicate keys
// refused. nlohmann differs on two inputs by design, which the comparison leaves out: it skips a
// UTF-8 BOM and stops at a NUL byte.
#include "base/json_reader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "base/json_depth.h"

using json = nlohmann::json;
using tmcra::ReadJsonStrict;

namespace {

// Same value and same type at every node (nlohmann's == calls 1 and 1.0 equal); for
// ordered_json, members in the same order too.
template <typename Json>
bool SameTree(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto it = a.begin(), other = b.begin(); it != a.end(); ++it, ++other) {
        if (it.key() != other.key() || !SameTree(*it, *other)) return false;
      }
      return true;
    }
    case json::value_t::array:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameTree(a[i], b[i])) return false;
      }
      return true;
    case json::value_t::number_float: {
      const double x = a.template get<double>();
      const double y = b.template get<double>();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    default:
      return a == b;
  }
}

// Compares with nlohmann on `text` (no BOM, no NUL); returns whether it was accepted.
bool Agree(const std::string& text) {
  json ours;
  const auto r = ReadJsonStrict(text, ours);
  const json theirs = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (r.duplicate_key) {
    // nlohmann keeps the last value under a repeated key; we refuse the document.
    CHECK_FALSE(r.ok);
    return false;
  }
  INFO("text: " << text);
  REQUIRE(r.ok == !theirs.is_discarded());
  if (r.ok) REQUIRE(SameTree(ours, theirs));
  return r.ok;
}

std::string RandomText(std::mt19937& rng, int depth) {
  static const char* kStrings[] = {"\"\"",
                                   "\"a\"",
                                   "\"\\u00e9\\n\\\"\"",
                                   "\"caf\xc3\xa9\"",
                                   "\"\\ud83d\\ude00\"",
                                   "\"\\/\\b\\f\\r\\t\\\\\"",
                                   "\"\xf0\x9f\x98\x80\""};
  static const char* kNumbers[] = {"0",
                                   "-0",
                                   "1",
                                   "-1",
                                   "0.5",
                                   "-0.0",
                                   "1e3",
                                   "1E-3",
                                   "2.5e+10",
                                   "18446744073709551615",
                                   "18446744073709551616",
                                   "-9223372036854775808",
                                   "-9223372036854775809",
                                   "1e308",
                                   "123456789012345678901234567890",
                                   "0.1",
                                   "5e-324"};
  switch (rng() % (depth > 4 ? 4 : 6)) {
    case 0:
      return kStrings[rng() % std::size(kStrings)];
    case 1:
      return kNumbers[rng() % std::size(kNumbers)];
    case 2:
      return (rng() % 3 == 0) ? "null" : (rng() % 2 ? "true" : "false");
    case 3:
      return " " + std::string(kNumbers[rng() % std::size(kNumbers)]) + "\n";
    case 4: {
      std::string out = "[";
      for (size_t i = rng() % 4; i > 0; --i) {
        out += RandomText(rng, depth + 1);
        if (i > 1) out += rng() % 2 ? "," : " ,\t";
      }
      return out + "]";
    }
    default: {
      std::string out = "{";
      const size_t n = rng() % 4;
      for (size_t i = 0; i < n; ++i) {
        out += "\"k" + std::to_string(rng() % 6) + "\"" + (rng() % 2 ? ":" : " : ");
        out += RandomText(rng, depth + 1);
        if (i + 1 < n) out += ",";
      }
      return out + "}";
    }
  }
}

std::string Mutate(std::string text, std::mt19937& rng) {
  static const char kBytes[] = "{}[],:\" \\-+.eE0123456789tfnu\x01\x7f\xc3\xa9\xed\xa0\xff";
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    const char b = kBytes[rng() % (sizeof kBytes - 1)];
    switch (rng() % 3) {
      case 0:
        text[at] = b;
        break;
      case 1:
        text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), b);
        break;
      default:
        text.erase(at, 1);
    }
  }
  return text;
}

}  // namespace

TEST_CASE("ReadJsonStrict accepts and builds what json::parse does, on edge cases",
          "[common][json]") {
  const char* accepted[] = {"{}",
                            "[]",
                            " {\"a\" : [1, -2, 3.5, true, false, null]} ",
                            "\"\\u0000\"",
                            "0",
                            "-0",
                            "18446744073709551615",
                            "18446744073709551616",
                            "-9223372036854775808",
                            "-9223372036854775809",
                            "1E+2",
                            "\"\\uD834\\uDD1E\"",
                            "\"\x7f\"",
                            "[[[[]]]]",
                            "{\"a\":{\"a\":{\"a\":1}}}",
                            "\"\xf4\x8f\xbf\xbf\"",
                            "1e-400"};
  for (const char* text : accepted) CHECK(Agree(text));
  const char* refused[] = {"",
                           " ",
                           "{",
                           "}",
                           "[1,]",
                           "{\"a\":1,}",
                           "{a:1}",
                           "01",
                           "1.",
                           ".5",
                           "+1",
                           "-",
                           "1e",
                           "1e+",
                           "NaN",
                           "Infinity",
                           "1e999",
                           "-1e999",
                           "tru",
                           "nulll",
                           "\"abc",
                           "\"\\x\"",
                           "\"\\u12\"",
                           "\"\\ud800\"",
                           "\"\\udc00\"",
                           "\"\\ud800\\u0041\"",
                           "\"\x01\"",
                           "\"\xc3\"",
                           "\"\xc0\x80\"",
                           "\"\xed\xa0\x80\"",
                           "\"\xf4\x90\x80\x80\"",
                           "\"\xff\"",
                           "[1 2]",
                           "{\"a\" 1}",
                           "{} {}",
                           "[] x",
                           "// c\n1",
                           "'a'"};
  for (const char* text : refused) CHECK_FALSE(Agree(text));
}

TEST_CASE("ReadJsonStrict reads a byte that stops a clean run at every position",
          "[common][json]") {
  // Strings are scanned eight bytes at a time: each kind of byte that stops the scan (escapes,
  // a raw control byte, a closing quote, UTF-8 valid and not), at each offset within and across
  // those words, in runs of clean ASCII of every length up to 40; the answer and the value must
  // be json::parse's.
  const std::string specials[] = {
      "\\n", "\\\"", "\\\\",     "\\u00e9",      "\\ud83d\\ude00",   "\\/",  "\x1f", "\x7f",
      " ",   "~",    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff", "\xc3", "\x80",
      "\"",  "\t"};
  int accepted = 0;
  int refused = 0;
  for (size_t length = 0; length <= 40; ++length) {
    for (size_t pos = 0; pos <= length; ++pos) {
      for (const auto& special : specials) {
        std::string body(length, 'a');
        body.insert(pos, special);
        (Agree("[\"" + body + "\"]") ? accepted : refused) +=
            1;  // Agree REQUIREs json::parse's answer
      }
    }
  }
  CHECK(accepted > 10000);
  CHECK(refused > 4000);
}

TEST_CASE("JsonNestingDepth skips strings whatever they hold, at every position",
          "[common][json]") {
  // The bytes inside a string are skipped eight at a time: brackets, escaped quotes and
  // backslashes, control and non-ASCII bytes at each offset; the depth must be a byte-at-a-time
  // count's.
  const auto reference = [](std::string_view text, int limit) {
    int depth = 0;
    int deepest = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') in_string = true;
      if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
      if ((c == ']' || c == '}') && depth > 0) --depth;
    }
    return std::min(deepest, limit + 1);
  };
  const std::string specials[] = {"[",  "{",    "\\\"",     "\\\\", "\\\\\"[", "\\",
                                  "\"", "\x01", "\xc3\xa9", "\xff", "\\u005b", "]]"};
  for (size_t length = 0; length <= 24; ++length) {
    for (size_t pos = 0; pos <= length; ++pos) {
      for (const auto& special : specials) {
        std::string inside(length, 'a');
        inside.insert(pos, special);
        for (const std::string& text :
             {"[\"" + inside + "\",[[1]]]", "{\"k\":\"" + inside + "\"}", "[[\"" + inside}) {
          INFO(text);
          REQUIRE(tmcra::JsonNestingDepth(text, 64) == reference(text, 64));
          REQUIRE(tmcra::JsonNestingDepth(text, 1) == reference(text, 1));
        }
      }
    }
  }
}

TEST_CASE("ReadJsonStrict refuses nesting deeper than max_depth", "[common][json]") {
  for (size_t depth : {1u, 2u, 63u, 64u, 65u, 200u}) {
    const std::string arrays = std::string(depth, '[') + std::string(depth, ']');
    std::string objects;
    for (size_t i = 0; i < depth; ++i) objects += "{\"k\":";
    objects += "1" + std::string(depth, '}');
    for (const std::string& text : {arrays, objects}) {
      json out;
      const auto r = ReadJsonStrict(text, out, 64);
      INFO("depth " << depth);
      CHECK(r.ok == (depth <= 64));
      CHECK(r.too_deep == (depth > 64));
      CHECK(ReadJsonStrict(text, out).ok);  // no limit
      CHECK(tmcra::JsonNestingDepth(text, 64) == static_cast<int>(std::min<size_t>(depth, 65)));
    }
  }
  // Brackets inside strings are not nesting; a syntax error before the cap is not "too deep".
  json out;
  CHECK(ReadJsonStrict("[\"" + std::string(100, '[') + "\"]", out, 2).ok);
  const auto bad = ReadJsonStrict("[1,,[[[[", out, 2);
  CHECK_FALSE(bad.ok);
  CHECK_FALSE(bad.too_deep);
}

TEST_CASE("ReadJsonStrict refuses a repeated key at any depth", "[common][json]") {
  for (const char* text :
       {"{\"a\":1,\"a\":2}", "[{\"b\":1,\"b\":1}]", "{\"x\":{\"\\u0061\":1,\"a\":2}}"}) {
    json out;
    const auto r = ReadJsonStrict(text, out);
    CHECK_FALSE(r.ok);
    CHECK(r.duplicate_key);
    CHECK(out.is_null());
  }
  json out;
  const auto r = ReadJsonStrict("{\"a\":{},\"b\":{\"a\":1}}", out);  // same key, other objects
  CHECK(r.ok);
  CHECK_FALSE(r.duplicate_key);
}

TEST_CASE("ReadJsonStrict agrees with json::parse on random documents and mutations",
          "[common][json]") {
  std::mt19937 rng(424242);
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = RandomText(rng, 0);
    if (i % 2 == 1) text = Mutate(text, rng);
    if (text.find('\0') != std::string::npos || text.rfind("\xef\xbb\xbf", 0) == 0) continue;
    (Agree(text) ? accepted : refused) += 1;
  }
  CHECK(accepted > 5000);
  CHECK(refused > 2000);
  // Deep nesting costs no stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  json out;
  CHECK(ReadJsonStrict(deep, out).ok);
}

TEST_CASE("ParseJsonLenient is json::parse(text, nullptr, false), repeated keys and BOM included",
          "[common][json]") {
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) {
    std::string text = RandomText(rng, 0);
    if (i % 2 == 1) text = Mutate(text, rng);
    if (i % 7 == 0) text = "\xef\xbb\xbf" + text;
    const json ours = tmcra::ParseJsonLenient(text);
    const json theirs = json::parse(text, nullptr, false);
    INFO("text: " << text);
    REQUIRE(ours.is_discarded() == theirs.is_discarded());
    if (!ours.is_discarded()) REQUIRE(SameTree(ours, theirs));
  }
  CHECK(tmcra::ParseJsonLenient("{\"a\":1,\"a\":2}")["a"] == 2);
}

TEST_CASE("ParseOrderedJsonLenient is ordered_json::parse, member order and repeated keys included",
          "[common][json]") {
  using ojson = nlohmann::ordered_json;
  std::mt19937 rng(11);
  int strict = 0;
  int repeated = 0;
  for (int i = 0; i < 8000; ++i) {
    std::string text = RandomText(rng, 0);
    if (i % 2 == 1) text = Mutate(text, rng);
    const ojson theirs = ojson::parse(text, nullptr, false);
    const ojson ours = tmcra::ParseOrderedJsonLenient(text);
    INFO("text: " << text);
    REQUIRE(ours.is_discarded() == theirs.is_discarded());
    if (!ours.is_discarded()) REQUIRE(SameTree(ours, theirs));  // order, types (int64, uint64)
    ojson direct;
    const auto r = tmcra::ReadOrderedJsonStrict(text, direct);
    if (r.ok) {
      ++strict;
      REQUIRE(SameTree(direct, theirs));
    }
    if (r.duplicate_key) ++repeated;
  }
  CHECK(strict > 1000);
  CHECK(repeated > 50);  // the fallback to nlohmann is exercised
  // A repeated key, at any depth, is refused by the strict reader; the lenient one keeps what
  // ordered_json keeps.
  for (const char* text : {"{\"a\":1,\"b\":2,\"a\":3}", "[{\"x\":{\"k\":1,\"k\":2}}]",
                           "{\"x\":{\"\\u0061\":1,\"a\":2}}"}) {
    ojson out;
    const auto r = tmcra::ReadOrderedJsonStrict(text, out);
    CHECK_FALSE(r.ok);
    CHECK(r.duplicate_key);
    CHECK(tmcra::ParseOrderedJsonLenient(text).dump() == ojson::parse(text).dump());
  }
  // A NUL byte is refused by the reader; nlohmann takes it for the end of the input.
  const std::string nul("{}\0x", 4);
  CHECK(tmcra::ParseOrderedJsonLenient(nul).dump() == ojson::parse(nul, nullptr, false).dump());
  // Document order is kept, and an object of 20,000 members reads (linear time: the reader
  // appends members instead of looking each key up first).
  std::string big = "{\"z\":0";
  for (int i = 0; i < 20000; ++i) big += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
  big += ",\"a\":1}";
  ojson out;
  REQUIRE(tmcra::ReadOrderedJsonStrict(big, out).ok);
  CHECK(out.size() == 20002);
  CHECK(out.begin().key() == "z");
  CHECK((--out.end()).key() == "a");
  CHECK(out["k19999"] == 19999);
}

TEST_CASE("a number no double holds is refused and named by its path", "[common][json]") {
  const auto path_of = [](const std::string& text) {
    json out;
    const auto r = ReadJsonStrict(text, out);
    INFO(text);
    CHECK_FALSE(r.ok);
    CHECK(out.is_null());
    CHECK(r.number_out_of_range);
    REQUIRE(r.number_paths.size() == 1);
    return r.number_paths[0];
  };
  CHECK(path_of("1e400") == json::array());
  CHECK(path_of("-1e400") == json::array());
  CHECK(path_of("1" + std::string(400, '0')) == json::array());
  CHECK(path_of(R"({"a":[1,{"b":1e400}]})") == json::array({"a", 1, "b"}));
  CHECK(path_of(R"({"a":[1,{"b":1e400 ]})") == json::array({"a", 1, "b"}));  // the first fault
  CHECK(path_of(R"({"m":{"z":0,"a":{},"k":[[2e308]]}})") == json::array({"m", "k", 0, 0}));
  // Another fault first: not a number out of range.
  json out;
  const auto syntax = ReadJsonStrict(R"({"a":tru,"b":1e400})", out);
  CHECK_FALSE(syntax.ok);
  CHECK_FALSE(syntax.number_out_of_range);
  CHECK(syntax.number_paths.empty());
  CHECK(ReadJsonStrict("1e-400", out).ok);  // an underflow is 0, as nlohmann reads it
  // The ordered reader and an elided member name it too.
  nlohmann::ordered_json ordered;
  const auto o = tmcra::ReadOrderedJsonStrict(R"({"z":{"y":[0,1e400]}})", ordered);
  CHECK(o.number_out_of_range);
  REQUIRE(o.number_paths.size() == 1);
  CHECK(o.number_paths[0] == json::array({"z", "y", 1}));
  tmcra::ElidedMember elide("evidence", {"source_event_seq"});
  const auto e = ReadJsonStrict(R"({"a":1,"evidence":{"w":[{"k":1,"x":-1e400}]}})", out, 0, &elide);
  CHECK(e.number_out_of_range);
  REQUIRE(e.number_paths.size() == 1);
  CHECK(e.number_paths[0] == json::array({"evidence", "w", 0, "x"}));
}

TEST_CASE("ReadJsonStrictPastOverflow reads the rest, each such number null", "[common][json]") {
  json out;
  auto r =
      tmcra::ReadJsonStrictPastOverflow(R"({"id":7,"params":{"x":1e400,"y":-1e999,"z":[1]}})", out);
  CHECK_FALSE(r.ok);
  CHECK(r.number_out_of_range);
  CHECK(r.number_paths == std::vector<json>{json::array({"params", "x"})});
  CHECK(out == json::parse(R"({"id":7,"params":{"x":null,"y":null,"z":[1]}})"));
  // In a top-level array, the first of each element that has one.
  r = tmcra::ReadJsonStrictPastOverflow(R"([{"a":1e400,"b":1e400},{"c":1},{"d":[1e400]},1e400])",
                                        out);
  CHECK(r.number_out_of_range);
  CHECK(r.number_paths ==
        std::vector<json>{json::array({0, "a"}), json::array({2, "d", 0}), json::array({3})});
  CHECK(out == json::parse(R"([{"a":null,"b":null},{"c":1},{"d":[null]},null])"));
  // Any other fault: refused as usual, nothing read.
  for (const char* text : {R"({"a":1e400,})", R"({"a":1e400,"a":1})", R"([1e400] x)"}) {
    INFO(text);
    json refused;
    r = tmcra::ReadJsonStrictPastOverflow(text, refused);
    CHECK_FALSE(r.ok);
    CHECK_FALSE(r.number_out_of_range);
    CHECK(r.number_paths.empty());
    CHECK(refused.is_null());
  }
  CHECK(tmcra::ReadJsonStrictPastOverflow(R"({"a":[1,2.5]})", out).ok);
  CHECK(out == json::parse(R"({"a":[1,2.5]})"));
}
