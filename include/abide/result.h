// abide/result.h: a small value-or-error type for the core API.
//
// The core reports ordinary bad input (a malformed header, an impossible date)
// through values, never exceptions. std::expected is C++23; this is the subset
// abide needs, over std::variant.
//
//   Result<Duration, std::string> parse(std::string_view s) {
//     if (s.empty()) return fail("empty value");   // an error: always through fail()
//     return std::chrono::seconds{5};              // a value: returned as it is
//   }
//
// An error never turns into a value by accident: a Result whose error type
// converts to its value type (Result<std::string, std::string>, or
// Result<std::string, const char*>) does not compile. Where the value is
// itself text, take ErrorMessage as the error type.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace abide {

// Wraps an error value so that Result<T, E> can be built from it unambiguously.
template <class E>
struct Unexpected {
  E error;
};

// Makes an Unexpected from an error value: `return abide::fail(err);`. A
// string literal stays a `const char*` here and becomes the Result's E (for
// example std::string) at the return.
template <class E>
constexpr Unexpected<std::decay_t<E>> fail(E&& e) {
  return {std::forward<E>(e)};
}

// A human-readable error, for a Result whose value is text too:
// Result<std::string, ErrorMessage> (a Result<std::string, std::string> would
// take `return message;` for a success). Built implicitly from text, so that
// `return fail("what went wrong");` works.
struct ErrorMessage {
  std::string text;

  ErrorMessage(std::string t) : text(std::move(t)) {}  // NOLINT: implicit by design
  ErrorMessage(const char* t) : text(t) {}             // NOLINT: implicit by design

  friend bool operator==(const ErrorMessage&, const ErrorMessage&) = default;
};

// True when T and E can be told apart by a Result: an E is never accepted
// where a T is expected, so an error cannot be returned as a success.
template <class T, class E>
concept DistinctResultTypes = !std::is_same_v<std::remove_cv_t<T>, std::remove_cv_t<E>> && !std::is_convertible_v<E, T>;

// Holds either a T (success) or an E (failure). Discarding one is a warning:
// a result that nobody looks at is an error that nobody handles.
//
// Reading the value of a failure, or the error of a success, is a
// precondition violation: it asserts in builds without NDEBUG, and otherwise
// throws std::bad_variant_access (never undefined behaviour). The library
// checks has_value() before every read; callers should too, or use value_or().
template <class T, class E>
class [[nodiscard]] Result {
  static_assert(DistinctResultTypes<T, E>,
                "abide::Result<T, E>: the error type E must not be T or convertible to T, or an error "
                "value would be taken as a success; wrap the error (e.g. abide::ErrorMessage for text)");

 public:
  using value_type = T;
  using error_type = E;

  constexpr Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design

  // From fail(x) for any x that converts to E: `return fail("text");`.
  template <class G>
  requires std::is_convertible_v<G, E>
  constexpr Result(Unexpected<G> e) : v_(std::in_place_index<1>, std::move(e.error)) {}  // NOLINT

  // True when this holds a value.
  constexpr bool has_value() const noexcept { return v_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  // The value. Precondition: has_value() (see above).
  constexpr T& value() & {
    assert(has_value() && "Result::value() on an error");
    return std::get<0>(v_);
  }
  constexpr const T& value() const& {
    assert(has_value() && "Result::value() on an error");
    return std::get<0>(v_);
  }
  constexpr T&& value() && {
    assert(has_value() && "Result::value() on an error");
    return std::get<0>(std::move(v_));
  }
  constexpr T& operator*() & { return value(); }
  constexpr const T& operator*() const& { return value(); }
  constexpr T&& operator*() && { return std::move(*this).value(); }
  constexpr T* operator->() { return &value(); }
  constexpr const T* operator->() const { return &value(); }

  // The value, or `fallback` converted to T on an error.
  template <class U>
  constexpr T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U>
  constexpr T value_or(U&& fallback) && {
    return has_value() ? std::get<0>(std::move(v_)) : static_cast<T>(std::forward<U>(fallback));
  }

  // The error. Precondition: !has_value().
  constexpr const E& error() const& {
    assert(!has_value() && "Result::error() on a value");
    return std::get<1>(v_);
  }
  constexpr E& error() & {
    assert(!has_value() && "Result::error() on a value");
    return std::get<1>(v_);
  }
  constexpr E&& error() && {
    assert(!has_value() && "Result::error() on a value");
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, E> v_;
};

}  // namespace abide
