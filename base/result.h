// Result<T>: a value or an Error, the return type of every fallible operation that crosses a
// module boundary. Its API is the subset of std::expected we use, so moving to std::expected
// (C++23) is mechanical. Status is Result<void>.
//
//   Result<int> Parse(std::string_view s);
//   auto r = Parse("42");
//   if (!r) return r.error();      // Error converts to any Result<U>
//   use(*r);
//
// Two macros carry the plumbing where the value is all a caller needs:
//   TMCRA_ASSIGN_OR_RETURN(auto n, Parse("42"));   // returns Parse's Error, else n = 42
//   TMCRA_RETURN_IF_ERROR(Save(n));                // returns Save's Error, if any
#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/error.h"

namespace tmcra {

template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;

  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!has_value());
    return std::get<1>(v_);
  }
  Error& error() {
    assert(!has_value());
    return std::get<1>(v_);
  }

  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;

  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }
  Error& error() {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status Ok() { return {}; }

}  // namespace tmcra

// Evaluates EXPR (any Result) once; when it holds an Error, returns that Error from the
// enclosing function, whose return type must be a Result.
#define TMCRA_RETURN_IF_ERROR(expr)                    \
  do {                                                 \
    if (auto tmcra_status_ = (expr); !tmcra_status_) { \
      return std::move(tmcra_status_.error());         \
    }                                                  \
  } while (0)

// Evaluates EXPR (a Result<T>) once; when it holds an Error, returns that Error from the
// enclosing function, else moves the value into LHS, which may declare it (`auto x`,
// `const auto& x`, or an existing variable).
#define TMCRA_ASSIGN_OR_RETURN(lhs, expr) \
  TMCRA_ASSIGN_OR_RETURN_IMPL_(TMCRA_RESULT_CONCAT_(tmcra_result_, __LINE__), lhs, expr)
#define TMCRA_RESULT_CONCAT_INNER_(a, b) a##b
#define TMCRA_RESULT_CONCAT_(a, b) TMCRA_RESULT_CONCAT_INNER_(a, b)
#define TMCRA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp) return std::move(tmp.error());           \
  lhs = std::move(*tmp)
