#include "base/utf8.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

using tmcra::CodePointLength;
using tmcra::IsValidUtf8;
using tmcra::SanitizeUtf8;

TEST_CASE("code point length counts what Python's len() counts", "[common][utf8]") {
  CHECK(CodePointLength("") == 0);
  CHECK(CodePointLength("hello") == 5);
  CHECK(CodePointLength("caf\xc3\xa9") == 4);               // café
  CHECK(CodePointLength("\xe6\x9c\xac\xe7\x95\xaa") == 2);  // 本番
  CHECK(CodePointLength("deploy \xf0\x9f\x9a\x80") == 8);   // emoji is one code point
  CHECK(CodePointLength("\xff\xfe") == 2);                  // invalid bytes count one each
}

TEST_CASE("UTF-8 validation rejects overlongs, surrogates and truncation", "[common][utf8]") {
  CHECK(IsValidUtf8("plain ascii"));
  CHECK(IsValidUtf8("\xe2\x80\xa8\xf0\x9f\x98\x80"));
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));      // U+D800
  CHECK_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(IsValidUtf8("\xe6\x9c"));          // truncated
  CHECK_FALSE(IsValidUtf8("\x80"));
}

TEST_CASE("the ASCII fast path counts and validates as a byte-at-a-time scan does",
          "[common][utf8]") {
  // Runs of ASCII of every length around the 8-byte steps, then a multi-byte, invalid or
  // truncated sequence, at every alignment.
  const auto reference_length = [](std::string_view text) {
    size_t count = 0;
    for (size_t i = 0; i < text.size(); ++count) {
      const size_t n = tmcra::Utf8SequenceLength(text, i);
      i += n == 0 ? 1 : n;
    }
    return count;
  };
  const auto reference_valid = [](std::string_view text) {
    for (size_t i = 0; i < text.size();) {
      const size_t n = tmcra::Utf8SequenceLength(text, i);
      if (n == 0) return false;
      i += n;
    }
    return true;
  };
  const std::string tails[] = {"",     "\xc3\xa9", "\xe6\x9c\xac", "\xf0\x9f\x9a\x80",
                               "\xff", "\xe6\x9c", "\xc0\xaf",     "\x80"};
  std::mt19937 rng(7);
  for (size_t lead = 0; lead < 20; ++lead) {
    for (const std::string& tail : tails) {
      for (size_t after = 0; after < 12; ++after) {
        std::string text(lead, 'a');
        text += tail;
        for (size_t k = 0; k < after; ++k) text.push_back(static_cast<char>('a' + rng() % 26));
        INFO("lead " << lead << ", after " << after << ", tail bytes " << tail.size());
        CHECK(CodePointLength(text) == reference_length(text));
        CHECK(IsValidUtf8(text) == reference_valid(text));
      }
    }
  }
}

TEST_CASE("sanitizing replaces each bad byte with U+FFFD", "[common][utf8]") {
  CHECK(SanitizeUtf8("ok") == "ok");
  CHECK(SanitizeUtf8("a\xffz") == "a\xef\xbf\xbdz");
  CHECK(IsValidUtf8(SanitizeUtf8("\xe6\x9c")));
}
