// abide/sf_value.h: Structured Field Values (RFC 9651), owning value tree and
// canonical serializer.
//
// The tree is built on the streaming parser of abide/structured_fields.h, with
// the same limits and errors; it is for convenience and for serializing, while
// hot paths walk the field with sf::Parser instead.
//
//   auto list = abide::sf::parse_list(R"("burst";q=100;w=60, "daily";q=1000)");
//   if (!list) return describe(list.error());
//   auto& first = std::get<abide::sf::Item>((*list)[0]);
//   const auto* q = abide::sf::find(first.params, "q");        // BareItem*, 100
//   auto text = abide::sf::serialize_list(*list);            // Result<std::string, Error>
//   if (!text) return describe(text.error());
//
// Ordered maps (Parameters, Dictionary) are vectors of key/value pairs with
// unique keys, in order of first appearance; parsing keeps the last value of a
// repeated key in the first one's place, as RFC 9651 section 4.2 says.
// Serialization follows section 4.1 and fails where it says so: integers and
// dates beyond 15 digits, decimals beyond 12 integer digits (after rounding to
// 3 fractional digits, ties to even), strings with characters outside
// %x20-7E, tokens and keys with characters their grammar excludes, and display
// strings that are not UTF-8.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "abide/result.h"
#include "abide/structured_fields.h"

namespace abide::sf {

// A decimal, held exactly as a count of thousandths (RFC 9651 decimals have at
// most three fractional digits).
struct Decimal {
  std::int64_t thousandths = 0;

  // The nearest decimal with 3 fractional digits, rounding the shortest decimal
  // form of d half to even (0.0025 -> 0.002). nullopt when d is not finite or
  // too large for any field value (|d| >= 1e15).
  static std::optional<Decimal> from_double(double d) noexcept;
  double to_double() const noexcept { return static_cast<double>(thousandths) / 1000.0; }
  friend auto operator<=>(const Decimal&, const Decimal&) = default;
};

struct Token {
  std::string value;
  friend auto operator<=>(const Token&, const Token&) = default;
};

struct ByteSequence {
  std::vector<std::uint8_t> bytes;
  friend auto operator<=>(const ByteSequence&, const ByteSequence&) = default;
};

// Seconds since the Unix epoch.
struct Date {
  std::int64_t seconds = 0;
  friend auto operator<=>(const Date&, const Date&) = default;
};

// Unicode text, as UTF-8.
struct DisplayString {
  std::string value;
  friend auto operator<=>(const DisplayString&, const DisplayString&) = default;
};

// The alternatives are in the order of sf::Type: static_cast<Type>(b.index()).
using BareItem = std::variant<std::int64_t, Decimal, std::string, Token, ByteSequence, bool, Date, DisplayString>;

// The type of a bare item.
inline Type type_of(const BareItem& b) noexcept { return static_cast<Type>(b.index()); }

using Parameters = std::vector<std::pair<std::string, BareItem>>;

struct Item {
  BareItem bare;
  Parameters params;
  friend bool operator==(const Item&, const Item&) = default;
};

struct InnerList {
  std::vector<Item> items;
  Parameters params;
  friend bool operator==(const InnerList&, const InnerList&) = default;
};

using ListMember = std::variant<Item, InnerList>;
using List = std::vector<ListMember>;
using Dictionary = std::vector<std::pair<std::string, ListMember>>;

// Looks a key up; nullptr when absent.
const BareItem* find(const Parameters& params, std::string_view key) noexcept;
const ListMember* find(const Dictionary& dict, std::string_view key) noexcept;
// Sets a key: replaces the value in place when present, appends otherwise.
void set(Parameters& params, std::string_view key, BareItem value);
void set(Dictionary& dict, std::string_view key, ListMember value);

// Converts what the streaming parser returned into an owning bare item.
BareItem to_bare_item(const BareView& view);

// ---- parsing (RFC 9651 section 4.2) ----

Result<Item, Error> parse_item(std::string_view field, const Limits& limits = {});
Result<List, Error> parse_list(std::string_view field, const Limits& limits = {});
Result<Dictionary, Error> parse_dictionary(std::string_view field, const Limits& limits = {});

// The same for a field received as several lines (combined with ", " first;
// error offsets count in the combined value).
Result<Item, Error> parse_item(std::span<const std::string_view> lines, const Limits& limits = {});
Result<List, Error> parse_list(std::span<const std::string_view> lines, const Limits& limits = {});
Result<Dictionary, Error> parse_dictionary(std::span<const std::string_view> lines, const Limits& limits = {});

// ---- serialization (RFC 9651 section 4.1) ----
// On failure the error's offset is the length of the output written so far,
// i.e. where the value that cannot be serialized would have gone.
// An empty list or dictionary serializes to "" (meaning: send no field).

Result<std::string, Error> serialize_item(const Item& item);
Result<std::string, Error> serialize_list(const List& list);
Result<std::string, Error> serialize_dictionary(const Dictionary& dict);
Result<std::string, Error> serialize_bare_item(const BareItem& bare);

}  // namespace abide::sf
