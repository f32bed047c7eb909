#include "base/result.h"

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

namespace {

Result<int> Quarter(int v) {
  TMCRA_ASSIGN_OR_RETURN(const int half, Half(v));
  TMCRA_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Result<std::unique_ptr<int>> Boxed(int v) {
  TMCRA_RETURN_IF_ERROR(Check(v >= 0));
  std::unique_ptr<int> box;
  TMCRA_ASSIGN_OR_RETURN(box, Result<std::unique_ptr<int>>(std::make_unique<int>(v)));
  return box;
}

}  // namespace

TEST_CASE("TMCRA_ASSIGN_OR_RETURN and TMCRA_RETURN_IF_ERROR pass the first Error on",
          "[common][result]") {
  CHECK(*Quarter(8) == 2);
  auto odd_half = Quarter(6);  // 6 halves to 3, which is odd
  REQUIRE_FALSE(odd_half);
  CHECK(odd_half.error().ToString() == "invalid_argument: odd value");
  CHECK(**Boxed(5) == 5);
  auto refused = Boxed(-1);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Errc::kUnavailable);
}
