// The identifier grammars (base/identifiers.h): fixed cases, and the hand-written matchers
// against std::regex of the service's patterns on every one- and two-byte name.
#include "base/identifiers.h"

#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

using tmcra::IsValidAgentId;
using tmcra::IsValidIntegrationId;
using tmcra::IsValidRequestId;
using tmcra::IsValidScope;

TEST_CASE("identifier grammars of the service", "[base][identifiers]") {
  CHECK(IsValidScope("personal"));
  CHECK(IsValidScope("proj-1.main_x"));
  CHECK(IsValidScope(std::string(128, 'a')));
  CHECK_FALSE(IsValidScope(std::string(129, 'a')));
  CHECK_FALSE(IsValidScope(""));
  CHECK_FALSE(IsValidScope("-x"));
  CHECK_FALSE(IsValidScope(".hidden"));
  CHECK_FALSE(IsValidScope("../etc"));
  CHECK_FALSE(IsValidScope("a/b"));
  CHECK_FALSE(IsValidScope("%2e%2e"));
  CHECK_FALSE(IsValidScope("a?b"));
  CHECK_FALSE(IsValidScope("a#b"));
  CHECK_FALSE(IsValidScope("a b"));
  CHECK_FALSE(IsValidScope("a\r\nb"));
  CHECK_FALSE(IsValidScope(std::string("a\0b", 3)));
  CHECK_FALSE(IsValidScope("é"));
  CHECK_FALSE(IsValidScope("a:b"));

  CHECK(IsValidAgentId("implementer"));
  CHECK(IsValidAgentId("codex:reviewer@host/1-2_3.4"));
  CHECK(IsValidAgentId(std::string(200, 'a')));
  CHECK_FALSE(IsValidAgentId(std::string(201, 'a')));
  CHECK_FALSE(IsValidAgentId(""));
  CHECK_FALSE(IsValidAgentId("/root"));
  CHECK_FALSE(IsValidAgentId("agent\r\nX-Evil: 1"));
  CHECK_FALSE(IsValidAgentId("agent one"));
  CHECK_FALSE(IsValidAgentId("agent%0d"));

  CHECK(IsValidIntegrationId("codex-plugin:1.2"));
  CHECK(IsValidIntegrationId(std::string(128, 'z')));
  CHECK_FALSE(IsValidIntegrationId(std::string(129, 'z')));
  CHECK_FALSE(IsValidIntegrationId("a/b"));
  CHECK_FALSE(IsValidIntegrationId("a@b"));
  CHECK_FALSE(IsValidIntegrationId("_x"));
  CHECK_FALSE(IsValidIntegrationId("x\n"));
}

TEST_CASE("scope names: the hand-written check agrees with the service's pattern",
          "[base][identifiers]") {
  const std::regex pattern{std::string(tmcra::kScopePattern)};
  std::vector<std::string> names = {"",
                                    "a",
                                    "A",
                                    "0",
                                    "_a",
                                    ".a",
                                    "-a",
                                    "a_b.c-d",
                                    "a b",
                                    "a/b",
                                    "a\\b",
                                    "a\nb",
                                    "a\0b",
                                    "é",
                                    "aé",
                                    "a:b",
                                    "a@b",
                                    std::string(128, 'x'),
                                    std::string(129, 'x'),
                                    "x" + std::string(127, '-'),
                                    "x" + std::string(128, '-')};
  names.push_back(std::string("a\0", 2));
  // Every one- and two-byte name, so each byte value meets both positions.
  for (int c = 0; c < 256; ++c) {
    names.emplace_back(1, static_cast<char>(c));
    names.push_back(std::string("a") + static_cast<char>(c));
  }
  for (const auto& name : names) {
    INFO("name of " << name.size() << " bytes");
    CHECK(IsValidScope(name) == std::regex_match(name.begin(), name.end(), pattern));
  }
}

TEST_CASE("agent, integration and request ids agree with their patterns", "[base][identifiers]") {
  const std::regex agent{std::string(tmcra::kAgentIdPattern)};
  const std::regex integration{std::string(tmcra::kIntegrationIdPattern)};
  std::vector<std::string> names = {"",
                                    "a",
                                    "a:b",
                                    "a@b",
                                    "a/b",
                                    "a b",
                                    std::string(128, 'x'),
                                    std::string(129, 'x'),
                                    std::string(200, 'x'),
                                    std::string(201, 'x')};
  for (int c = 0; c < 256; ++c) {
    names.emplace_back(1, static_cast<char>(c));
    names.push_back(std::string("a") + static_cast<char>(c));
  }
  for (const auto& name : names) {
    INFO("name of " << name.size() << " bytes");
    CHECK(IsValidAgentId(name) == std::regex_match(name.begin(), name.end(), agent));
    CHECK(IsValidIntegrationId(name) == std::regex_match(name.begin(), name.end(), integration));
    CHECK(IsValidRequestId(name) == IsValidIntegrationId(name));
  }
}
