#include <catch2/catch.hpp>

#include <regex>
#include <set>

#include "src/common/ids.h"
#include "src/common/sha256.h"

TEST_CASE("SHA-256 hex matches known digests", "[common][sha256]") {
  CHECK(tmcra::Sha256Hex("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(tmcra::Sha256Hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("UUIDv4 has the version and variant bits and does not repeat", "[common][ids]") {
  const std::regex shape("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = tmcra::UuidV4();
    CHECK(std::regex_match(id, shape));
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
}
