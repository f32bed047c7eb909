#include "base/log.h"

#include <catch2/catch.hpp>

TEST_CASE("log levels parse from TMCRA_LOG_LEVEL names", "[common][log]") {
  CHECK(tmcra::ParseLogLevel("debug") == spdlog::level::debug);
  CHECK(tmcra::ParseLogLevel("warning") == spdlog::level::warn);
  CHECK(tmcra::ParseLogLevel("off") == spdlog::level::off);
  CHECK_FALSE(tmcra::ParseLogLevel("verbose").has_value());
}
