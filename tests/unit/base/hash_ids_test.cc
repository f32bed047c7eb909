#include <catch2/catch.hpp>
#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/ids.h"
#include "base/sha256.h"

TEST_CASE("SHA-256 hex matches known digests", "[common][sha256]") {
  CHECK(tmcra::Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(tmcra::Sha256Hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks (the context is reused between calls and after a longer input).
  CHECK(tmcra::Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(tmcra::Sha256Hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("SHA-256: the SHA-extension and portable code agree at every tail length",
          "[common][sha256]") {
  // Lengths around every padding case (one or two final blocks), and a long input; whichever
  // code this CPU runs (the SHA extensions where it has them) against the portable one.
  uint32_t seed = 12345;
  const auto next = [&] {
    seed = seed * 1103515245u + 12345u;
    return static_cast<char>(seed >> 16);
  };
  for (size_t length = 0; length < 300; ++length) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = next();
    INFO("length " << length);
    CHECK(tmcra::Sha256Hex(bytes) == tmcra::Sha256HexPortable(bytes));
  }
  std::string large(100003, '\0');
  for (char& c : large) c = next();
  CHECK(tmcra::Sha256Hex(large) == tmcra::Sha256HexPortable(large));
  CHECK(tmcra::Sha256HexPortable("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(tmcra::Sha256Hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 gives the same digests on many threads at once", "[common][sha256]") {
  const std::string million(1000000, 'a');
  std::vector<std::string> digests(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < digests.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (tmcra::Sha256Hex("abc") !=
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") {
          return;
        }
      }
      digests[t] = tmcra::Sha256Hex(million);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& digest : digests) {
    CHECK(digest == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
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
