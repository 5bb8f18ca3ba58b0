// abide/result.h: a small value-or-error type for the core API.
//
// The core reports ordinary bad input (a malformed header, an impossible date)
// through values, never exceptions. std::expected is C++23; this is the subset
// abide needs, over std::variant.
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

namespace abide {

// Wraps an error value so that Result<T, E> can be built from it unambiguously.
template <class E>
struct Unexpected {
  E error;
};

// Makes an Unexpected<E> from an error value: `return abide::fail(err);`.
template <class E>
constexpr Unexpected<std::decay_t<E>> fail(E&& e) {
  return {std::forward<E>(e)};
}

// Holds either a T (success) or an E (failure).
template <class T, class E>
class Result {
 public:
  constexpr Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  constexpr Result(Unexpected<E> e) : v_(std::in_place_index<1>, std::move(e.error)) {}  // NOLINT

  // True when this holds a value.
  constexpr bool has_value() const noexcept { return v_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  // The value; only valid when has_value().
  constexpr T& value() & { return std::get<0>(v_); }
  constexpr const T& value() const& { return std::get<0>(v_); }
  constexpr T&& value() && { return std::get<0>(std::move(v_)); }
  constexpr T& operator*() & { return value(); }
  constexpr const T& operator*() const& { return value(); }
  constexpr T* operator->() { return &value(); }
  constexpr const T* operator->() const { return &value(); }

  // The error; only valid when !has_value().
  constexpr const E& error() const& { return std::get<1>(v_); }
  constexpr E& error() & { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

}  // namespace abide
