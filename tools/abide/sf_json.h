// The JSON form of Structured Field Values used by the structured-field test
// suite (and by `abide parse sf` / `abide format sf`):
//   Item          [bare, params]
//   Inner list    [[item, ...], params]
//   List          [member, ...]
//   Dictionary    [[key, member], ...]
//   Parameters    [[key, bare], ...]
//   Bare item     integer and decimal: JSON numbers; string: JSON string;
//                 boolean: JSON boolean; token, binary (base32), date,
//                 displaystring: {"__type": T, "value": V}.
// Header-only so that the conformance test checks the very mapping the CLI uses.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "abide/sf_value.h"

namespace abide::cli::sfjson {

using nlohmann::json;

// RFC 4648 section 6 base32 with padding.
inline std::string base32_encode(const std::vector<std::uint8_t>& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  std::uint64_t acc = 0;
  int bits = 0;
  for (std::uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += kAlphabet[(acc >> bits) & 31U];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (5 - bits)) & 31U];
  while (out.size() % 8 != 0) out += '=';
  return out;
}

// Decodes base32 (padding optional); nullopt on a character outside the alphabet.
inline std::optional<std::vector<std::uint8_t>> base32_decode(std::string_view text) {
  std::vector<std::uint8_t> out;
  std::uint64_t acc = 0;
  int bits = 0;
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  for (char c : text) {
    unsigned v = 0;
    if (c >= 'A' && c <= 'Z') {
      v = static_cast<unsigned>(c - 'A');
    } else if (c >= '2' && c <= '7') {
      v = static_cast<unsigned>(c - '2' + 26);
    } else {
      return std::nullopt;
    }
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>((acc >> bits) & 0xFFU));
    }
  }
  return out;
}

// ---- tree to JSON ----

inline json to_json(const sf::BareItem& b) {
  switch (sf::type_of(b)) {
    case sf::Type::integer: return std::get<std::int64_t>(b);
    case sf::Type::decimal: return std::get<sf::Decimal>(b).to_double();
    case sf::Type::string: return std::get<std::string>(b);
    case sf::Type::token: return json{{"__type", "token"}, {"value", std::get<sf::Token>(b).value}};
    case sf::Type::byte_sequence:
      return json{{"__type", "binary"}, {"value", base32_encode(std::get<sf::ByteSequence>(b).bytes)}};
    case sf::Type::boolean: return std::get<bool>(b);
    case sf::Type::date: return json{{"__type", "date"}, {"value", std::get<sf::Date>(b).seconds}};
    case sf::Type::display_string:
      return json{{"__type", "displaystring"}, {"value", std::get<sf::DisplayString>(b).value}};
  }
  return nullptr;
}

inline json to_json(const sf::Parameters& params) {
  json out = json::array();
  for (const auto& [k, v] : params) out.push_back(json::array({k, to_json(v)}));
  return out;
}

inline json to_json(const sf::Item& item) { return json::array({to_json(item.bare), to_json(item.params)}); }

inline json to_json(const sf::ListMember& m) {
  if (const auto* item = std::get_if<sf::Item>(&m)) return to_json(*item);
  const auto& inner = std::get<sf::InnerList>(m);
  json items = json::array();
  for (const auto& i : inner.items) items.push_back(to_json(i));
  return json::array({items, to_json(inner.params)});
}

inline json to_json(const sf::List& list) {
  json out = json::array();
  for (const auto& m : list) out.push_back(to_json(m));
  return out;
}

inline json to_json(const sf::Dictionary& dict) {
  json out = json::array();
  for (const auto& [k, m] : dict) out.push_back(json::array({k, to_json(m)}));
  return out;
}

// ---- JSON to tree ----
// Each returns nullopt and sets `why` when the JSON is not a value of that
// shape, or holds a number no field value can carry.

inline std::optional<sf::BareItem> bare_from_json(const json& j, std::string& why) {
  if (j.is_boolean()) return sf::BareItem{j.get<bool>()};
  if (j.is_number_integer() && !j.is_number_unsigned()) return sf::BareItem{j.get<std::int64_t>()};
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      why = "integer out of range";
      return std::nullopt;
    }
    return sf::BareItem{static_cast<std::int64_t>(u)};
  }
  if (j.is_number_float()) {
    auto d = sf::Decimal::from_double(j.get<double>());
    if (!d) {
      why = "decimal out of range";
      return std::nullopt;
    }
    return sf::BareItem{*d};
  }
  if (j.is_string()) return sf::BareItem{j.get<std::string>()};
  if (j.is_object() && j.contains("__type") && j.contains("value") && j["__type"].is_string()) {
    const std::string type = j["__type"].get<std::string>();
    const json& v = j["value"];
    if (type == "token" && v.is_string()) return sf::BareItem{sf::Token{v.get<std::string>()}};
    if (type == "displaystring" && v.is_string()) return sf::BareItem{sf::DisplayString{v.get<std::string>()}};
    if (type == "date" && v.is_number_integer()) {
      if (v.is_number_unsigned() &&
          v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        why = "date out of range";
        return std::nullopt;
      }
      return sf::BareItem{sf::Date{v.get<std::int64_t>()}};
    }
    if (type == "binary" && v.is_string()) {
      auto bytes = base32_decode(v.get<std::string>());
      if (!bytes) {
        why = "binary value is not base32";
        return std::nullopt;
      }
      return sf::BareItem{sf::ByteSequence{std::move(*bytes)}};
    }
  }
  why = "not a bare item: " + j.dump();
  return std::nullopt;
}

inline std::optional<sf::Parameters> params_from_json(const json& j, std::string& why) {
  if (!j.is_array()) {
    why = "parameters must be an array";
    return std::nullopt;
  }
  sf::Parameters out;
  for (const auto& p : j) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string()) {
      why = "a parameter must be [key, value]";
      return std::nullopt;
    }
    auto v = bare_from_json(p[1], why);
    if (!v) return std::nullopt;
    out.emplace_back(p[0].get<std::string>(), std::move(*v));
  }
  return out;
}

inline std::optional<sf::Item> item_from_json(const json& j, std::string& why) {
  if (!j.is_array() || j.size() != 2) {
    why = "an item must be [bare item, parameters]";
    return std::nullopt;
  }
  auto bare = bare_from_json(j[0], why);
  if (!bare) return std::nullopt;
  auto params = params_from_json(j[1], why);
  if (!params) return std::nullopt;
  return sf::Item{std::move(*bare), std::move(*params)};
}

inline std::optional<sf::ListMember> member_from_json(const json& j, std::string& why) {
  if (j.is_array() && j.size() == 2 && j[0].is_array()) {
    sf::InnerList inner;
    for (const auto& i : j[0]) {
      auto item = item_from_json(i, why);
      if (!item) return std::nullopt;
      inner.items.push_back(std::move(*item));
    }
    auto params = params_from_json(j[1], why);
    if (!params) return std::nullopt;
    inner.params = std::move(*params);
    return sf::ListMember{std::move(inner)};
  }
  auto item = item_from_json(j, why);
  if (!item) return std::nullopt;
  return sf::ListMember{std::move(*item)};
}

inline std::optional<sf::List> list_from_json(const json& j, std::string& why) {
  if (!j.is_array()) {
    why = "a list must be an array";
    return std::nullopt;
  }
  sf::List out;
  for (const auto& m : j) {
    auto member = member_from_json(m, why);
    if (!member) return std::nullopt;
    out.push_back(std::move(*member));
  }
  return out;
}

inline std::optional<sf::Dictionary> dictionary_from_json(const json& j, std::string& why) {
  if (!j.is_array()) {
    why = "a dictionary must be an array";
    return std::nullopt;
  }
  sf::Dictionary out;
  for (const auto& kv : j) {
    if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string()) {
      why = "a dictionary member must be [key, value]";
      return std::nullopt;
    }
    auto member = member_from_json(kv[1], why);
    if (!member) return std::nullopt;
    out.emplace_back(kv[0].get<std::string>(), std::move(*member));
  }
  return out;
}

// Parses lines as header_type ("item", "list", "dictionary") and returns the
// JSON form, or the parse error.
inline Result<json, sf::Error> parse_to_json(std::string_view header_type, std::span<const std::string_view> lines,
                                             const sf::Limits& limits = {}) {
  if (header_type == "item") {
    auto r = sf::parse_item(lines, limits);
    if (!r) return fail(r.error());
    return to_json(*r);
  }
  if (header_type == "list") {
    auto r = sf::parse_list(lines, limits);
    if (!r) return fail(r.error());
    return to_json(*r);
  }
  auto r = sf::parse_dictionary(lines, limits);
  if (!r) return fail(r.error());
  return to_json(*r);
}

// Parses lines as header_type and returns the canonical serialization.
inline Result<std::string, sf::Error> parse_to_canonical(std::string_view header_type,
                                                         std::span<const std::string_view> lines,
                                                         const sf::Limits& limits = {}) {
  if (header_type == "item") {
    auto r = sf::parse_item(lines, limits);
    if (!r) return fail(r.error());
    return sf::serialize_item(*r);
  }
  if (header_type == "list") {
    auto r = sf::parse_list(lines, limits);
    if (!r) return fail(r.error());
    return sf::serialize_list(*r);
  }
  auto r = sf::parse_dictionary(lines, limits);
  if (!r) return fail(r.error());
  return sf::serialize_dictionary(*r);
}

// The canonical serialization of a JSON value of header_type; nullopt (with
// `why`) when the JSON is not such a value or the value cannot be serialized.
inline std::optional<std::string> format_json(std::string_view header_type, const json& j, std::string& why) {
  Result<std::string, sf::Error> r = std::string();
  if (header_type == "item") {
    auto v = item_from_json(j, why);
    if (!v) return std::nullopt;
    r = sf::serialize_item(*v);
  } else if (header_type == "list") {
    auto v = list_from_json(j, why);
    if (!v) return std::nullopt;
    r = sf::serialize_list(*v);
  } else {
    auto v = dictionary_from_json(j, why);
    if (!v) return std::nullopt;
    r = sf::serialize_dictionary(*v);
  }
  if (!r) {
    why = "cannot serialize: " + std::string(sf::to_string(r.error().code)) + " at output byte " +
          std::to_string(r.error().offset);
    return std::nullopt;
  }
  return std::move(*r);
}

}  // namespace abide::cli::sfjson
