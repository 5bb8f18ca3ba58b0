// libFuzzer target: parse -> serialize -> parse round trip. Byte 0 picks the
// top-level type; the rest is the field value. Whatever parses must serialize,
// the serialization must parse to an equal value, and serializing that value
// again must give the same text (canonical form is idempotent).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "abide/sf_value.h"

namespace {

using namespace abide::sf;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

template <class Parse, class Serialize>
void round_trip(std::string_view field, Parse parse, Serialize serialize) {
  auto first = parse(field);
  if (!first) return;
  auto text = serialize(*first);
  check(text.has_value());
  auto second = parse(std::string_view(*text));
  check(second.has_value());
  check(*second == *first);
  auto again = serialize(*second);
  check(again.has_value());
  check(*again == *text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view field(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      round_trip(
          field, [](std::string_view f) { return parse_item(f); }, [](const Item& v) { return serialize_item(v); });
      break;
    case 1:
      round_trip(
          field, [](std::string_view f) { return parse_list(f); }, [](const List& v) { return serialize_list(v); });
      break;
    default:
      round_trip(
          field, [](std::string_view f) { return parse_dictionary(f); },
          [](const Dictionary& v) { return serialize_dictionary(v); });
      break;
  }
  return 0;
}
