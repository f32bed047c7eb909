#include "src/common/result.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>

using tmcra::Errc;
using tmcra::Error;
using tmcra::Result;
using tmcra::Status;

namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return Error::Invalid("odd value");
  return v / 2;
}

Status Check(bool ok) {
  if (!ok) return Error::Unavailable("down");
  return tmcra::Ok();
}

}  // namespace

TEST_CASE("Result carries a value or an error", "[common][result]") {
  auto good = Half(8);
  REQUIRE(good);
  CHECK(*good == 4);
  auto bad = Half(3);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::kInvalidArgument);
  CHECK_FALSE(bad.error().retryable);
  CHECK(bad.error().ToString() == "invalid_argument: odd value");
  CHECK(bad.value_or(-1) == -1);
}

TEST_CASE("Status and retryable classification", "[common][result]") {
  CHECK(Check(true));
  auto s = Check(false);
  REQUIRE_FALSE(s);
  CHECK(s.error().retryable);
  CHECK(Error::Timeout("t").retryable);
  CHECK_FALSE(Error::Conflict("c").retryable);
  CHECK(tmcra::ErrcName(Errc::kDataLoss) == "data_loss");
}

TEST_CASE("Result holds move-only values", "[common][result]") {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  REQUIRE(r);
  std::unique_ptr<int> p = *std::move(r);
  CHECK(*p == 7);
}
