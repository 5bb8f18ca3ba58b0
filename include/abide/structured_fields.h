// abide/structured_fields.h: Structured Field Values for HTTP (RFC 9651),
// streaming layer.
//
// A pull parser over the caller's buffer: it walks a field value member by
// member and parameter by parameter, never allocates, and reports the first
// error with its code and byte offset. Strings, byte sequences and display
// strings are handed out raw (a view of the source, already validated); the
// decode functions below turn them into values only when the caller needs them.
// The owning value tree and the serializer are in abide/sf_value.h.
//
// Usage (a RateLimit-Policy-like dictionary, `burst;q=100;w=60, daily;q=1000`):
//
//   abide::sf::Parser p(field_value);
//   while (auto m = p.next_dict_member()) {          // m->key: "burst", then "daily"
//     if (m->inner_list) continue;                   // its items are skipped for us
//     while (auto param = p.next_param()) {          // parameters of this member
//       if (param->key == "q" && param->value.type == abide::sf::Type::integer)
//         quota = param->value.number;
//     }
//   }
//   if (p.failed()) report(p.error());               // e.g. {invalid_key, 17}
//
// Walking rules:
// - The first call picks the top-level type: next_dict_member(), next_list_member()
//   or item(). Do not mix them on one Parser.
// - Parameters belong to the item (or inner list) returned last. next_param()
//   yields them; when it returns nullopt they are done (or an error occurred).
// - For an inner list member, next_inner_item() yields its items (each followed
//   by its own next_param() loop); after it returns nullopt, next_param() yields
//   the inner list's parameters.
// - Anything not walked is still parsed and validated when the caller moves on:
//   calling next_*_member() skips the rest of the current member.
// - Every walking function returns nullopt at the end and on error; failed()
//   tells them apart. Once failed, every call returns nullopt.
// - A field is valid only when the whole value has been parsed: for a list or
//   dictionary, when next_*_member() returned nullopt without failed(); for an
//   item, call finish() (it also works for lists and dictionaries, skipping
//   whatever was left). Duplicate dictionary keys and parameter keys are
//   reported in order of appearance; RFC 9651 says the last one wins (keeping
//   the first one's position), which the tree layer implements.
//
// Several field lines of one field are combined as RFC 9110 section 5.3 says,
// joined with ", " (join_field_lines below); parse the result.
//
// Limits (struct Limits) bound the work and every structure the tree layer
// builds: the field length, list and dictionary members, parameters per item or
// inner list, and items per inner list. Exceeding one is an error at the byte
// where it happened. Nesting is bounded by the grammar itself: a list or
// dictionary member may be an inner list of items, and nothing nests deeper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/result.h"

namespace abide::sf {

// Bounds against hostile input. The defaults are at least what RFC 9651
// section 3.1 asks parsers to support (1024 members, 256 parameters, 256 inner
// list items, byte sequences of 16384 octets).
struct Limits {
  std::size_t max_field_length = 64 * 1024;  // bytes of the (combined) field value
  std::size_t max_members = 1024;            // members of a list or dictionary
  std::size_t max_params = 256;              // parameters of one item or inner list
  std::size_t max_inner_items = 256;         // items of one inner list
};

// What went wrong. Each has a short description (to_string).
enum class ErrorCode : std::uint8_t {
  field_too_long,          // the field value is longer than Limits::max_field_length
  too_many_members,        // more list or dictionary members than Limits::max_members
  too_many_params,         // more parameters than Limits::max_params
  too_many_inner_items,    // more inner list items than Limits::max_inner_items
  missing_item,            // an item was required (empty item field, nothing after ',' or '=')
  invalid_bare_item,       // this byte cannot start a bare item
  invalid_number,          // '-' without a digit, or a decimal ending in '.'
  number_too_long,         // more than 15 integer digits, or 12 + 3 for a decimal
  invalid_string,          // bad character or escape, or no closing quote
  invalid_token,           // (serialization only) a token with a character tokens cannot hold
  invalid_byte_sequence,   // bad base64 character or padding, or no closing ':'
  invalid_boolean,         // '?' not followed by 0 or 1
  invalid_date,            // '@' not followed by an integer
  invalid_display_string,  // bad character, escape or UTF-8, or no closing quote
  invalid_key,             // a key must start with a-z or '*'
  invalid_inner_list,      // inside '(...)': expected a space or ')'
  expected_comma,          // after a list or dictionary member: expected ',' or the end
  trailing_comma,          // a list or dictionary ends with ','
  trailing_characters,     // an item field continues after the item and its parameters
};

// The first error found: its code and the byte offset into the parsed value
// (the offending byte, or the value's length when it ended too early).
struct Error {
  ErrorCode code{};
  std::size_t offset = 0;
  friend bool operator==(const Error&, const Error&) = default;
};

// A short English description of the code, e.g. "invalid string".
std::string_view to_string(ErrorCode code) noexcept;
// "invalid string at byte 5".
std::string describe(const Error& error);

// The type of a bare item.
enum class Type : std::uint8_t {
  integer,
  decimal,
  string,
  token,
  byte_sequence,
  boolean,
  date,
  display_string,
};

// "integer", "decimal", "string", "token", "byte sequence", "boolean", "date", "display string".
std::string_view to_string(Type type) noexcept;

// A bare item as the streaming parser sees it: numbers decoded, text as a view
// of the parsed buffer (valid while that buffer lives).
struct BareView {
  Type type = Type::integer;
  // integer and date: the value; boolean: 0 or 1; decimal: the value times
  // 1000 (a decimal has at most 3 fractional digits, so this is exact).
  std::int64_t number = 0;
  // string: the text between the quotes, escapes left in place;
  // token: the token; byte_sequence: the base64 text between the colons;
  // display_string: the text between the quotes, percent-encoding left in place;
  // numbers, boolean, date: the source text of the item (empty for the
  // implicit true of a key without '=').
  std::string_view raw;
  // string: raw holds a backslash escape; display_string: raw holds a
  // percent escape. When false, raw is already the value's text.
  bool escaped = false;

  // The decimal (or integer) as a double.
  double as_double() const noexcept {
    return type == Type::decimal ? static_cast<double>(number) / 1000.0 : static_cast<double>(number);
  }
};

// A list or dictionary member.
struct MemberView {
  std::string_view key;     // dictionary key; empty for list members
  bool inner_list = false;  // true: walk it with next_inner_item(); `item` is unset
  BareView item;            // the member's bare item when !inner_list
                            // (a dictionary key without '=' is boolean true)
};

// A parameter: key and bare item (a key without '=' is boolean true).
struct ParamView {
  std::string_view key;
  BareView value;
};

// The streaming parser. Cheap to construct (no allocation); one per field value.
class Parser {
 public:
  // field must outlive the parser and every view it returns.
  explicit Parser(std::string_view field, const Limits& limits = {}) noexcept
      : begin_(field.data()), size_(field.size()), limits_(limits) {}

  // Next dictionary member (key, then item or inner list); nullopt at the end or on error.
  std::optional<MemberView> next_dict_member() noexcept;
  // Next list member; nullopt at the end or on error.
  std::optional<MemberView> next_list_member() noexcept;
  // The bare item of an item field (its parameters follow via next_param()).
  std::optional<BareView> item() noexcept;
  // Next item of the current inner list; nullopt after ')' or on error.
  std::optional<BareView> next_inner_item() noexcept;
  // Next parameter of the item or inner list returned last; nullopt when none is left or on error.
  std::optional<ParamView> next_param() noexcept;
  // Parses and validates whatever was not walked yet. True when the whole field is valid.
  // For an item field that was not started, parses it as an item.
  bool finish() noexcept;

  // True after an error; error() then says which and where.
  bool failed() const noexcept { return state_ == State::failed; }
  const Error& error() const noexcept { return error_; }
  // Bytes consumed so far.
  std::size_t offset() const noexcept { return pos_; }

 private:
  enum class State : std::uint8_t {
    start,         // nothing parsed yet
    params,        // after an item or ')': its parameters may follow
    inner,         // inside '(' before the next item or ')'
    inner_params,  // after an inner list item: its parameters may follow
    after_member,  // a list/dictionary member is complete: ',' or end next
    done,          // the whole field was parsed
    failed,
  };
  enum class Top : std::uint8_t { none, list, dictionary, item };

  bool fail(ErrorCode code, std::size_t at) noexcept;
  bool check_length() noexcept;
  bool skip_params() noexcept;
  void end_params() noexcept;
  bool skip_inner() noexcept;
  bool end_item() noexcept;
  std::optional<MemberView> next_member(Top top) noexcept;

  const char* begin_;
  std::size_t pos_ = 0;
  std::size_t size_;
  Limits limits_;
  std::size_t members_ = 0;
  std::size_t params_ = 0;
  std::size_t inner_items_ = 0;
  Error error_{};
  State state_ = State::start;
  Top top_ = Top::none;
};

// ---- decoding raw values (no validation: pass views the parser returned) ----

// Unescapes a string's raw text into buf (needs raw.size() bytes at most).
// Returns the value as a view of buf, or nullopt when buf is too small.
std::optional<std::string_view> unescape_string(std::string_view raw, std::span<char> buf) noexcept;
// Appends a string's unescaped value to out.
void append_unescaped_string(std::string_view raw, std::string& out);

// Number of bytes a byte sequence's base64 text decodes to.
std::size_t decoded_byte_sequence_size(std::string_view raw) noexcept;
// Decodes a byte sequence into buf; returns the bytes written, or nullopt when buf is too small.
std::optional<std::size_t> decode_byte_sequence(std::string_view raw, std::span<std::uint8_t> buf) noexcept;
// Appends a byte sequence's decoded bytes to out.
void append_decoded_byte_sequence(std::string_view raw, std::vector<std::uint8_t>& out);

// Decodes a display string's percent-encoded text into UTF-8 in buf (needs
// raw.size() bytes at most). Returns a view of buf, or nullopt when buf is too small.
std::optional<std::string_view> decode_display_string(std::string_view raw, std::span<char> buf) noexcept;
// Appends a display string's UTF-8 value to out.
void append_decoded_display_string(std::string_view raw, std::string& out);

// ---- several field lines ----

// Combines the field lines of one field as RFC 9110 section 5.3 says (joined
// with ", "). Fails with field_too_long (offset: the limit) when the result
// would exceed limits.max_field_length; nothing is allocated beyond it.
Result<std::string, Error> join_field_lines(std::span<const std::string_view> lines, const Limits& limits = {});

}  // namespace abide::sf
