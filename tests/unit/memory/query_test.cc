#include "memory/query.h"

#include <catch2/catch.hpp>
#include <random>

#include "memory/cjk.h"

using tmcra::memory::ParseQuery;

TEST_CASE("queries become words without stop words, and CJK trigrams", "[memory][query]") {
  auto t = ParseQuery("What is the exporter's PORT? port 7421");
  CHECK(t.words == std::vector<std::string>{"exporter", "port", "7421"});
  CHECK(t.trigrams.empty());
  CHECK(t.WordMatch().find("\"port\"") != std::string::npos);
  auto cjk = ParseQuery("本番のポート、何番?");
  CHECK(cjk.words.size() == 2);
  CHECK(cjk.trigrams == std::vector<std::string>{"本番の", "番のポ", "のポー", "ポート"});
  auto quote = ParseQuery("say \"hi\"");
  CHECK(quote.WordMatch() == "\"say\" OR \"hi\"");
  CHECK(ParseQuery("the a of").words.empty());
}

TEST_CASE("CJK runs become bigrams, and a run of one a prefix query", "[memory][query][cjk]") {
  auto t = ParseQuery("東京と大阪");
  CHECK(t.cjk_bigrams == std::vector<std::string>{"東京", "京と", "と大", "大阪"});
  CHECK(t.cjk_prefixes.empty());
  auto one = ParseQuery("猫 cat");
  CHECK(one.cjk_bigrams.empty());
  CHECK(one.cjk_prefixes == std::vector<std::string>{"猫"});
  CHECK(one.CjkMatch() == "\"猫\"*");
  // A run inside a mixed word; Latin, Cyrillic and accented letters are not CJK.
  auto mixed = ParseQuery("FooServiceのテスト привет café");
  CHECK(mixed.cjk_bigrams == std::vector<std::string>{"のテ", "テス", "スト"});
  CHECK(mixed.CjkMatch() == "\"のテ\" OR \"テス\" OR \"スト\"");
  CHECK(ParseQuery("plain english").CjkMatch().empty());
  // Lone characters: only Han (a lone kana or Hangul syllable is mostly a particle), at most 4,
  // and only in a query with no two-character window.
  CHECK(ParseQuery("猫，狗").cjk_prefixes == std::vector<std::string>{"猫", "狗"});
  CHECK(ParseQuery("の は 그 이").CjkMatch().empty());
  CHECK(ParseQuery("一 二 三 四 五 六 七 八 九 十").cjk_prefixes.size() == 4);
  auto mixed_run = ParseQuery("用Redis的端口");
  CHECK(mixed_run.cjk_prefixes.empty());
  CHECK(mixed_run.cjk_bigrams == std::vector<std::string>{"的端", "端口"});
  auto korean = ParseQuery("서울 날씨");
  CHECK(korean.cjk_bigrams == std::vector<std::string>{"서울", "날씨"});
  // Distinct, and at most 96 terms however long the query.
  CHECK(ParseQuery("東京 東京").cjk_bigrams.size() == 1);
  std::string han;
  for (uint32_t cp = 0x4e00; cp < 0x4e00 + 300; ++cp) {
    han += static_cast<char>(0xe0 | (cp >> 12));
    han += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    han += static_cast<char>(0x80 | (cp & 0x3f));
  }
  auto capped = ParseQuery(han);
  CHECK(capped.cjk_bigrams.size() + capped.cjk_prefixes.size() == 96);
}

TEST_CASE("the CJK index text: each code point of a run with the next, the last alone",
          "[memory][query][cjk]") {
  using tmcra::memory::CjkIndexText;
  CHECK(CjkIndexText("東京は大阪") == "東京 京は は大 大阪 阪");
  CHECK(CjkIndexText("abc 猫 def") == "猫");
  CHECK(CjkIndexText("Port 8080、東京") == "東京 京");  // 、 is punctuation, not CJK
  CHECK(CjkIndexText("").empty());
  CHECK(CjkIndexText("Le café de Zoë, привет").empty());
  CHECK(CjkIndexText("서울에서") == "서울 울에 에서 서");
  CHECK(CjkIndexText("ラーメン") == "ラー ーメ メン ン");
  CHECK(CjkIndexText("\xf0\xa0\xae\xb7野家") == "\xf0\xa0\xae\xb7野 野家 家");  // U+20BB7
  // An invalid byte ends a run and is dropped.
  CHECK(CjkIndexText("東\xff京") == "東 京");
  CHECK(CjkIndexText("東\xe4\xba") == "東");  // cut short
}

TEST_CASE("every CJK term of a query is found in the index text of the same string",
          "[memory][query][cjk]") {
  using tmcra::memory::CjkIndexText;
  // Code points of every class the two sides treat differently, and bytes that are not UTF-8.
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           "7",
                                           " ",
                                           "-",
                                           "_",
                                           "\xc3\xa9",
                                           "\xd0\xbf",
                                           "東",
                                           "京",
                                           "猫",
                                           "の",
                                           "ー",
                                           "カ",
                                           "ｶ",
                                           "서",
                                           "울",
                                           "々",
                                           "、",
                                           "。",
                                           "！",
                                           "\xf0\xa0\xae\xb7",
                                           "\xf0\x9f\x98\x80",
                                           "\xff",
                                           "\xe4\xba",
                                           "\xe3\x80\x80"};
  std::mt19937 rng(5);
  int bigrams = 0;
  int prefixes = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    const std::string index = " " + CjkIndexText(text) + " ";
    const auto terms = tmcra::memory::ParseQuery(text);
    INFO(text);
    for (const auto& b : terms.cjk_bigrams) {
      CHECK(index.find(" " + b + " ") != std::string::npos);
      ++bigrams;
    }
    for (const auto& p : terms.cjk_prefixes) {
      CHECK(index.find(" " + p) != std::string::npos);
      ++prefixes;
    }
  }
  CHECK(bigrams > 1000);
  CHECK(prefixes > 100);
}
