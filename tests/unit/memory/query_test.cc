#include "memory/query.h"

#include <catch2/catch.hpp>

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
