// DumpJson against nlohmann's own dump(-1, ' ', false, replace): byte for byte on edge cases and
// on random values with random bytes (invalid UTF-8 included).
#include "base/json_writer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/json_scan.h"

using json = nlohmann::json;

namespace {

std::string Reference(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string RandomBytes(std::mt19937& rng) {
  static const std::string kPieces[] = {"a",
                                        "\"",
                                        "\\",
                                        "/",
                                        "\n",
                                        "\t",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\xc3",
                                        "\x80",
                                        "\xed\xa0\x80",
                                        "\xc0\x80",
                                        "\xf4\x90\x80\x80",
                                        "\xff",
                                        "\xe2\x82",
                                        " ",
                                        "{",
                                        "\b",
                                        "\f",
                                        "\r",
                                        "\0"};
  std::string out;
  const size_t n = rng() % 12;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      out.push_back(static_cast<char>(rng() % 256));
    } else {
      const auto& piece = kPieces[rng() % std::size(kPieces)];
      out += piece.empty() ? std::string(1, '\0') : piece;
    }
  }
  return out;
}

json RandomValue(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 3 ? 6 : 8)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - static_cast<int64_t>(rng()) * 4096;
    case 3:
      return static_cast<uint64_t>(rng()) << 32 | rng();
    case 4:
      return std::ldexp(static_cast<double>(rng()), static_cast<int>(rng() % 200) - 100);
    case 5:
      return RandomBytes(rng);
    case 6: {
      json a = json::array();
      for (size_t i = rng() % 5; i > 0; --i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (size_t i = rng() % 5; i > 0; --i) o[RandomBytes(rng)] = RandomValue(rng, depth + 1);
      return o;
    }
  }
}

}  // namespace

TEST_CASE("DumpJson writes what nlohmann's dump writes, on edge cases", "[common][json]") {
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls.push_back(static_cast<char>(c));
  const json cases[] = {
      nullptr,
      true,
      false,
      0,
      -1,
      std::numeric_limits<int64_t>::min(),
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<uint64_t>::max(),
      0.1,
      -0.0,
      1.0,
      1e300,
      5e-324,
      std::nan(""),
      std::numeric_limits<double>::infinity(),
      "",
      controls,
      "\x7f quote \" backslash \\ slash / tab \t",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
      "lone \x80 continuation",
      "truncated \xe2\x82",
      "overlong \xc0\x80",
      "surrogate \xed\xa0\x80",
      "too high \xf4\x90\x80\x80",
      "\xff\xfe",
      json::array(),
      json::object(),
      json{{"b", 1}, {"a", {1, 2.5, "x"}}, {"\n\"key", {{"nested", json::object()}}}},
      json::binary({1, 2, 3})};
  for (const auto& v : cases) {
    INFO(Reference(v));
    CHECK(tmcra::DumpJson(v) == Reference(v));
  }
}

TEST_CASE("DumpJson writes what nlohmann's dump writes, on random values", "[common][json]") {
  std::mt19937 rng(20261130);
  for (int i = 0; i < 20000; ++i) {
    const json v = RandomValue(rng, 0);
    const std::string expected = Reference(v);
    const std::string got = tmcra::DumpJson(v);
    if (got != expected) {
      INFO("value " << i << ": " << expected);
      REQUIRE(got == expected);
    }
  }
}

TEST_CASE("DumpJson escapes a byte that needs it at every position of a long run",
          "[common][json]") {
  // The writer skips clean runs sixteen bytes at a time (SSE2), then eight: each kind of byte
  // that stops it, at each offset within and across those blocks, in runs of clean ASCII of
  // every length up to 40.
  const std::string specials[] = {
      std::string(1, '\0'), "\x1f", "\"",   "\\",   "\x7f", " ",   "~", "\xc3\xa9", "\xe2\x82\xac",
      "\xf0\x9f\x98\x80",   "\xff", "\xc3", "\x80", "\"\\", "\n\n"};
  for (size_t length = 0; length <= 40; ++length) {
    for (size_t pos = 0; pos <= length; ++pos) {
      for (const auto& special : specials) {
        std::string text(length, 'a');
        text.insert(pos, special);
        const json v = text;
        const std::string expected = Reference(v);
        const std::string got = tmcra::DumpJson(v);
        if (got != expected) {
          INFO("length " << length << " position " << pos << ": " << expected);
          REQUIRE(got == expected);
        }
      }
    }
  }
}

TEST_CASE(
    "PlainJsonRun stops at the first byte a JSON string cannot carry as it is for every "
    "byte at every position",
    "[common][json]") {
  // Every byte value at every offset of a 48-byte clean buffer, scanned at each length, against
  // the byte-by-byte rule: PlainJsonRun (sixteen bytes at a time with SSE2, then the rest) and
  // internal::PlainJsonRunWords (eight, then one: the path without SSE2, which PlainJsonRun
  // reaches only for its last fifteen bytes on x86-64).
  const auto plain = [](unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; };
  size_t checked = 0;
  for (int value = 0; value < 256; ++value) {
    const auto c = static_cast<unsigned char>(value);
    for (size_t pos = 0; pos < 48; ++pos) {
      std::vector<unsigned char> buffer(48, 'x');
      buffer[pos] = c;
      for (size_t n = 0; n <= buffer.size(); ++n) {
        const size_t expected = pos < n && !plain(c) ? pos : n;
        const size_t got = tmcra::PlainJsonRun(buffer.data(), n);
        const size_t words = tmcra::internal::PlainJsonRunWords(buffer.data(), n);
        if (got != expected || words != expected) {
          INFO("byte " << value << " at " << pos << " of " << n);
          REQUIRE(got == expected);
          REQUIRE(words == expected);
        }
        ++checked;
      }
    }
  }
  REQUIRE(checked == 256 * 48 * 49);
}
