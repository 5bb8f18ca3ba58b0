// libFuzzer target: the structured-field parsers on arbitrary input.
// Byte 0 picks the top-level type (item, list, dictionary) and how the
// streaming parser is walked (fully, or skipping parts); the rest is the field
// value, split into field lines at '\n'. Checks that walking styles agree, that
// error offsets lie inside the input, that raw values decode into buffers of
// the documented size, and that whatever parses also serializes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "abide/sf_value.h"
#include "abide/structured_fields.h"

namespace {

using namespace abide::sf;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void decode(const BareView& v) {
  char buf[256];
  std::uint8_t bytes[256];
  switch (v.type) {
    case Type::string:
      if (v.raw.size() <= sizeof buf) check(unescape_string(v.raw, buf).has_value());
      break;
    case Type::display_string:
      if (v.raw.size() <= sizeof buf) check(decode_display_string(v.raw, buf).has_value());
      break;
    case Type::byte_sequence:
      if (decoded_byte_sequence_size(v.raw) <= sizeof bytes) {
        auto n = decode_byte_sequence(v.raw, bytes);
        check(n.has_value() && *n == decoded_byte_sequence_size(v.raw));
      }
      break;
    default: break;
  }
}

void walk_params(Parser& p) {
  while (auto param = p.next_param()) decode(param->value);
}

// Walks everything (full) or skips inner lists and parameters (!full).
Parser walk(int type, std::string_view field, bool full, const Limits& limits) {
  Parser p(field, limits);
  if (type == 0) {
    if (auto item = p.item()) {
      decode(*item);
      if (full) walk_params(p);
    }
    p.finish();
    return p;
  }
  for (;;) {
    auto m = type == 1 ? p.next_list_member() : p.next_dict_member();
    if (!m) break;
    if (!full) continue;
    if (m->inner_list) {
      while (auto item = p.next_inner_item()) {
        decode(*item);
        walk_params(p);
      }
    } else {
      decode(m->item);
    }
    walk_params(p);
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int type = data[0] % 3;
  const bool small_limits = (data[0] & 0x80) != 0;
  const std::string_view field(reinterpret_cast<const char*>(data + 1), size - 1);
  Limits limits;
  if (small_limits) {
    limits.max_field_length = 64;
    limits.max_members = 4;
    limits.max_params = 3;
    limits.max_inner_items = 3;
  }

  const Parser full = walk(type, field, true, limits);
  const Parser skip = walk(type, field, false, limits);
  check(full.failed() == skip.failed());
  if (full.failed()) {
    check(full.error() == skip.error());
    check(full.error().offset <= field.size());
    check(!to_string(full.error().code).empty());
  }

  // The tree agrees with the streaming walk, and what parses serializes.
  std::string out;
  bool ok = false;
  Error error{};
  if (type == 0) {
    auto r = parse_item(field, limits);
    if ((ok = r.has_value())) out = serialize_item(*r).value();
    else error = r.error();
  } else if (type == 1) {
    auto r = parse_list(field, limits);
    if ((ok = r.has_value())) out = serialize_list(*r).value();
    else error = r.error();
  } else {
    auto r = parse_dictionary(field, limits);
    if ((ok = r.has_value())) out = serialize_dictionary(*r).value();
    else error = r.error();
  }
  check(ok == !full.failed());
  if (!ok) check(error == full.error());

  // Several field lines: split at '\n' and parse the lines as one field.
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= field.size(); ++i) {
    if (i == field.size() || field[i] == '\n') {
      lines.push_back(field.substr(start, i - start));
      start = i + 1;
    }
  }
  if (lines.size() > 1) {
    auto joined = join_field_lines(lines, limits);
    if (type == 1) {
      auto r = parse_list(std::span<const std::string_view>(lines), limits);
      if (joined) check(r.has_value() == parse_list(*joined, limits).has_value());
      else check(!r.has_value());
    }
  }
  return 0;
}
