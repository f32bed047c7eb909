#include "src/common/utf8.h"

#include <catch2/catch.hpp>

using tmcra::CodePointLength;
using tmcra::IsValidUtf8;
using tmcra::SanitizeUtf8;

TEST_CASE("code point length counts what Python's len() counts", "[common][utf8]") {
  CHECK(CodePointLength("") == 0);
  CHECK(CodePointLength("hello") == 5);
  CHECK(CodePointLength("caf\xc3\xa9") == 4);                 // café
  CHECK(CodePointLength("\xe6\x9c\xac\xe7\x95\xaa") == 2);     // 本番
  CHECK(CodePointLength("deploy \xf0\x9f\x9a\x80") == 8);      // emoji is one code point
  CHECK(CodePointLength("\xff\xfe") == 2);                     // invalid bytes count one each
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

TEST_CASE("sanitizing replaces each bad byte with U+FFFD", "[common][utf8]") {
  CHECK(SanitizeUtf8("ok") == "ok");
  CHECK(SanitizeUtf8("a\xffz") == "a\xef\xbf\xbdz");
  CHECK(IsValidUtf8(SanitizeUtf8("\xe6\x9c")));
}
