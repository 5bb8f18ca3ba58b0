// Structured Field Values: the streaming parser (walking, raw values, errors
// and their offsets, limits), the value tree, the serializer's failure cases,
// and the round-trip property over generated values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "abide/sf_value.h"
#include "abide/structured_fields.h"
#include "ascii.h"
#include "utf8.h"

namespace {

using namespace abide::sf;
using namespace std::string_view_literals;

// ---- streaming walk ----

TEST(SfStream, WalksListMembersAndParameters) {
  Parser p(R"("burst";q=100;w=60, "daily";q=1000;w=86400;qu="requests")");
  std::vector<std::string> seen;
  while (auto m = p.next_list_member()) {
    ASSERT_FALSE(m->inner_list);
    ASSERT_EQ(m->item.type, Type::string);
    seen.emplace_back(m->item.raw);
    while (auto param = p.next_param()) {
      seen.push_back(std::string(param->key) + "=" + std::string(param->value.raw));
    }
  }
  EXPECT_FALSE(p.failed());
  EXPECT_THAT(seen, testing::ElementsAre("burst", "q=100", "w=60", "daily", "q=1000", "w=86400", "qu=requests"));
  EXPECT_EQ(p.offset(), 56U);
}

TEST(SfStream, NumbersAreDecoded) {
  Parser p("-42;d=1.25;e=-0.5;n=999999999999999;b;f=?0;t=@1659578233");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->type, Type::integer);
  EXPECT_EQ(item->number, -42);
  std::vector<std::pair<Type, std::int64_t>> params;
  while (auto param = p.next_param()) params.emplace_back(param->value.type, param->value.number);
  EXPECT_TRUE(p.finish());
  using P = std::pair<Type, std::int64_t>;
  EXPECT_THAT(params,
              testing::ElementsAre(P{Type::decimal, 1250}, P{Type::decimal, -500}, P{Type::integer, 999999999999999},
                                   P{Type::boolean, 1}, P{Type::boolean, 0}, P{Type::date, 1659578233}));
}

TEST(SfStream, DecimalAsDouble) {
  Parser p("12.5");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_DOUBLE_EQ(item->as_double(), 12.5);
}

TEST(SfStream, DictionaryWithInnerListsAndBareKeys) {
  Parser p("a=(1 2;x);p=3, b, c=?0;q");
  auto m = p.next_dict_member();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->key, "a");
  ASSERT_TRUE(m->inner_list);
  auto i1 = p.next_inner_item();
  ASSERT_TRUE(i1);
  EXPECT_EQ(i1->number, 1);
  EXPECT_FALSE(p.next_param());
  auto i2 = p.next_inner_item();
  ASSERT_TRUE(i2);
  EXPECT_EQ(i2->number, 2);
  auto x = p.next_param();
  ASSERT_TRUE(x);
  EXPECT_EQ(x->key, "x");
  EXPECT_EQ(x->value.type, Type::boolean);
  EXPECT_FALSE(p.next_param());
  EXPECT_FALSE(p.next_inner_item());  // ')'
  auto lp = p.next_param();           // the inner list's parameter
  ASSERT_TRUE(lp);
  EXPECT_EQ(lp->key, "p");
  EXPECT_EQ(lp->value.number, 3);
  m = p.next_dict_member();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->key, "b");
  EXPECT_EQ(m->item.type, Type::boolean);
  EXPECT_EQ(m->item.number, 1);
  m = p.next_dict_member();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->key, "c");
  EXPECT_EQ(m->item.number, 0);
  EXPECT_FALSE(p.next_dict_member());  // skips ";q"
  EXPECT_FALSE(p.failed());
}

TEST(SfStream, UnwalkedPartsAreSkippedAndValidated) {
  Parser p("(a;x=1 b);y=2, c;z=3");
  ASSERT_TRUE(p.next_list_member());
  auto m = p.next_list_member();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->item.raw, "c");
  auto z = p.next_param();
  ASSERT_TRUE(z);
  EXPECT_EQ(z->key, "z");
  EXPECT_FALSE(p.next_list_member());
  EXPECT_FALSE(p.failed());

  Parser bad("(a;x=1 b;Y);y=2, c");  // an error inside the skipped inner list
  ASSERT_TRUE(bad.next_list_member());
  EXPECT_FALSE(bad.next_list_member());
  ASSERT_TRUE(bad.failed());
  EXPECT_EQ(bad.error(), (Error{ErrorCode::invalid_key, 9}));
}

TEST(SfStream, NextParamSkipsRemainingInnerItems) {
  Parser p("(1 2 3);n=4");
  ASSERT_TRUE(p.next_list_member());
  auto n = p.next_param();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->key, "n");
  EXPECT_FALSE(p.next_list_member());
  EXPECT_FALSE(p.failed());
}

TEST(SfStream, FinishValidatesTheRest) {
  Parser ok("a, b;c, (d)");
  ASSERT_TRUE(ok.next_list_member());
  EXPECT_TRUE(ok.finish());
  Parser item("tok;a=1  ");
  EXPECT_TRUE(item.finish());
  Parser bad_item("tok;a=1 x");
  ASSERT_TRUE(bad_item.item());
  EXPECT_FALSE(bad_item.finish());
  EXPECT_EQ(bad_item.error(), (Error{ErrorCode::trailing_characters, 8}));
}

TEST(SfStream, ItemErrorSurfacesInTheParameterLoop) {
  Parser p("1;a=2 junk");
  ASSERT_TRUE(p.item());
  while (p.next_param()) {
  }
  EXPECT_TRUE(p.failed());
  EXPECT_EQ(p.error().code, ErrorCode::trailing_characters);
}

TEST(SfStream, ErrorIsStickyAndMixingTopLevelTypesYieldsNothing) {
  Parser p("a, ,b");
  ASSERT_TRUE(p.next_list_member());
  EXPECT_FALSE(p.next_list_member());
  ASSERT_TRUE(p.failed());
  const Error e = p.error();
  EXPECT_FALSE(p.next_list_member());
  EXPECT_FALSE(p.next_param());
  EXPECT_FALSE(p.next_inner_item());
  EXPECT_FALSE(p.finish());
  EXPECT_EQ(p.error(), e);

  Parser q("a=1");
  ASSERT_TRUE(q.next_dict_member());
  EXPECT_FALSE(q.next_list_member());
  EXPECT_FALSE(q.item());
}

TEST(SfStream, EmptyListAndDictionaryAreValid) {
  Parser l("   ");
  EXPECT_FALSE(l.next_list_member());
  EXPECT_FALSE(l.failed());
  Parser d("");
  EXPECT_FALSE(d.next_dict_member());
  EXPECT_FALSE(d.failed());
}

// ---- raw values ----

TEST(SfRaw, StringsWithEscapesAreRawUntilUnescaped) {
  Parser p(R"("a\"b\\c";k="plain")");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->type, Type::string);
  EXPECT_EQ(item->raw, R"(a\"b\\c)");
  EXPECT_TRUE(item->escaped);
  std::array<char, 16> buf{};
  auto v = unescape_string(item->raw, buf);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, R"(a"b\c)");
  std::array<char, 3> tiny{};
  EXPECT_FALSE(unescape_string(item->raw, tiny));
  std::string out = "x";
  append_unescaped_string(item->raw, out);
  EXPECT_EQ(out, R"(xa"b\c)");
  auto k = p.next_param();
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->value.escaped);
  EXPECT_EQ(k->value.raw, "plain");
}

TEST(SfRaw, ByteSequencesDecode) {
  Parser p(":cHsxMjM0NTY3ODk6:");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->type, Type::byte_sequence);
  EXPECT_EQ(item->raw, "cHsxMjM0NTY3ODk6");
  EXPECT_EQ(decoded_byte_sequence_size(item->raw), 12U);
  std::array<std::uint8_t, 12> buf{};
  auto n = decode_byte_sequence(item->raw, buf);
  ASSERT_TRUE(n);
  EXPECT_EQ(std::string(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n)), "p{123456789:");
  std::array<std::uint8_t, 11> small{};
  EXPECT_FALSE(decode_byte_sequence(item->raw, small));

  for (auto [raw, text] : {std::pair{"aGVsbG8="sv, "hello"sv}, std::pair{"aGVsbG8"sv, "hello"sv}, std::pair{""sv, ""sv},
                           std::pair{"YQ=="sv, "a"sv}, std::pair{"YWI="sv, "ab"sv}}) {
    std::vector<std::uint8_t> out;
    append_decoded_byte_sequence(raw, out);
    EXPECT_EQ(std::string(out.begin(), out.end()), text) << raw;
  }
}

TEST(SfRaw, DisplayStringsDecode) {
  Parser p(R"(%"f%c3%bc%c3%bc %22q%22")");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->type, Type::display_string);
  EXPECT_TRUE(item->escaped);
  std::array<char, 32> buf{};
  auto v = decode_display_string(item->raw, buf);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, "f\xc3\xbc\xc3\xbc \"q\"");
  std::array<char, 4> small{};
  EXPECT_FALSE(decode_display_string(item->raw, small));
}

TEST(SfRaw, TokensKeepSlashesAndColons) {
  Parser p("text/html;a=*foo:bar");
  auto item = p.item();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->type, Type::token);
  EXPECT_EQ(item->raw, "text/html");
  auto a = p.next_param();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->value.raw, "*foo:bar");
}

// ---- errors and offsets ----

struct ErrorCase {
  const char* type;
  std::string_view input;
  ErrorCode code;
  std::size_t offset;
};

abide::Result<bool, Error> parse_as(std::string_view type, std::string_view input, const Limits& limits = {}) {
  Parser p(input, limits);
  if (type == "list") {
    while (p.next_list_member()) {
    }
  } else if (type == "dictionary") {
    while (p.next_dict_member()) {
    }
  } else {
    p.finish();
  }
  if (p.failed()) return abide::fail(p.error());
  return true;
}

TEST(SfErrors, CodeAndOffset) {
  const ErrorCase cases[] = {
      {"item", R"("abc)", ErrorCode::invalid_string, 4},
      {"item", R"("a\x")", ErrorCode::invalid_string, 3},
      {"item", "\"a\tb\"", ErrorCode::invalid_string, 2},
      {"item", "1.", ErrorCode::invalid_number, 2},
      {"item", "1.;a", ErrorCode::invalid_number, 2},
      {"item", "1.2345", ErrorCode::number_too_long, 5},
      {"item", "1234567890123456", ErrorCode::number_too_long, 15},
      {"item", "-1234567890123456", ErrorCode::number_too_long, 16},
      {"item", "1234567890123.5", ErrorCode::number_too_long, 13},
      {"item", "-", ErrorCode::invalid_number, 1},
      {"item", "-a", ErrorCode::invalid_number, 1},
      {"item", "?2", ErrorCode::invalid_boolean, 1},
      {"item", "?", ErrorCode::invalid_boolean, 1},
      {"item", "@1.5", ErrorCode::invalid_date, 2},
      {"item", "@x", ErrorCode::invalid_date, 1},
      {"item", ":YQ=", ErrorCode::invalid_byte_sequence, 4},
      {"item", ":a=b:", ErrorCode::invalid_byte_sequence, 3},
      {"item", ":a:", ErrorCode::invalid_byte_sequence, 2},
      {"item", ":YQ===:", ErrorCode::invalid_byte_sequence, 3},
      {"item", ":YWJj=:", ErrorCode::invalid_byte_sequence, 5},
      {"item", R"(%"%C3%bc")", ErrorCode::invalid_display_string, 3},
      {"item", R"(%"%c3")", ErrorCode::invalid_display_string, 5},
      {"item", R"(%"%c3a")", ErrorCode::invalid_display_string, 5},
      {"item", R"(%"%ff")", ErrorCode::invalid_display_string, 2},
      {"item", R"(%"%ed%a0%80")", ErrorCode::invalid_display_string, 5},
      {"item", "%'a'", ErrorCode::invalid_display_string, 1},
      {"item", "a b", ErrorCode::trailing_characters, 2},
      {"item", "", ErrorCode::missing_item, 0},
      {"item", "   ", ErrorCode::missing_item, 3},
      {"item", "!", ErrorCode::invalid_bare_item, 0},
      {"item", "(1)", ErrorCode::invalid_bare_item, 0},
      {"item", "a;B=1", ErrorCode::invalid_key, 2},
      {"item", "a;b=", ErrorCode::missing_item, 4},
      {"item", "a ;b", ErrorCode::trailing_characters, 2},
      {"list", "a, ", ErrorCode::trailing_comma, 1},
      {"list", "a b", ErrorCode::expected_comma, 2},
      {"list", "(a b", ErrorCode::invalid_inner_list, 4},
      {"list", "(a,b)", ErrorCode::invalid_inner_list, 2},
      {"list", "1,,2", ErrorCode::invalid_bare_item, 2},
      {"list", "\ta", ErrorCode::invalid_bare_item, 0},
      {"dictionary", "a=1, B=2", ErrorCode::invalid_key, 5},
      {"dictionary", "a=(1 2)x", ErrorCode::expected_comma, 7},
      {"dictionary", "a=", ErrorCode::missing_item, 2},
      {"dictionary", "a=1,", ErrorCode::trailing_comma, 3},
  };
  for (const auto& c : cases) {
    auto r = parse_as(c.type, c.input);
    ASSERT_FALSE(r.has_value()) << c.type << ": " << c.input;
    EXPECT_EQ(r.error(), (Error{c.code, c.offset})) << c.type << ": " << c.input << " -> " << describe(r.error());
  }
}

TEST(SfErrors, TreeParsersReportTheSameError) {
  auto l = parse_list("a, b c");
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error(), (Error{ErrorCode::expected_comma, 5}));
  auto d = parse_dictionary("a=1;x=\"");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), (Error{ErrorCode::invalid_string, 7}));
  auto i = parse_item("1 2");
  ASSERT_FALSE(i);
  EXPECT_EQ(i.error(), (Error{ErrorCode::trailing_characters, 2}));
}

TEST(SfErrors, Describe) {
  EXPECT_EQ(describe(Error{ErrorCode::invalid_string, 5}), "invalid string at byte 5");
  EXPECT_EQ(to_string(Type::byte_sequence), "byte sequence");
}

// ---- limits ----

TEST(SfLimits, FieldLength) {
  Limits l;
  l.max_field_length = 10;
  EXPECT_TRUE(parse_as("list", "aaaaaaaaaa", l));
  auto r = parse_as("list", "aaaaaaaaaaa", l);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), (Error{ErrorCode::field_too_long, 10}));
  auto item = parse_item("aaaaaaaaaaa", l);
  ASSERT_FALSE(item);
  EXPECT_EQ(item.error().code, ErrorCode::field_too_long);
}

TEST(SfLimits, MembersParametersInnerItems) {
  Limits l;
  l.max_members = 2;
  l.max_params = 1;
  l.max_inner_items = 2;
  EXPECT_TRUE(parse_as("list", "a, b", l));
  EXPECT_EQ(parse_as("list", "a, b, c", l).error(), (Error{ErrorCode::too_many_members, 6}));
  EXPECT_EQ(parse_as("dictionary", "a, b, c", l).error(), (Error{ErrorCode::too_many_members, 6}));
  EXPECT_TRUE(parse_as("item", "a;x", l));
  EXPECT_EQ(parse_as("item", "a;x;y", l).error(), (Error{ErrorCode::too_many_params, 4}));
  EXPECT_EQ(parse_as("list", "(a;x;y)", l).error(), (Error{ErrorCode::too_many_params, 5}));
  EXPECT_EQ(parse_as("list", "(a);x;y", l).error(), (Error{ErrorCode::too_many_params, 6}));
  EXPECT_TRUE(parse_as("list", "(a b)", l));
  EXPECT_EQ(parse_as("list", "(a b c)", l).error(), (Error{ErrorCode::too_many_inner_items, 5}));
  // The parameter count restarts for each item.
  EXPECT_TRUE(parse_as("list", "(a;x b;y);z, c;w", l));
}

TEST(SfLimits, DefaultsCoverRfcMinimums) {
  std::string list;
  for (int i = 0; i < 1024; ++i) list += (i ? ", a" : "a") + std::to_string(i);
  EXPECT_TRUE(parse_list(list));
  EXPECT_EQ(parse_list(list + ", x").error().code, ErrorCode::too_many_members);
  std::string params = "a";
  for (int i = 0; i < 256; ++i) params += ";p" + std::to_string(i);
  EXPECT_TRUE(parse_item(params));
  EXPECT_EQ(parse_item(params + ";x").error().code, ErrorCode::too_many_params);
  EXPECT_TRUE(parse_item(":" + std::string(21848, 'A') + ":"));  // 16386 octets
  EXPECT_EQ(parse_item(std::string(Limits{}.max_field_length + 1, 'a')).error().code, ErrorCode::field_too_long);
}

TEST(SfLimits, JoinedLinesAreBounded) {
  Limits l;
  l.max_field_length = 8;
  const std::array<std::string_view, 2> ok{"abc", "def"};  // "abc, def"
  auto j = join_field_lines(ok, l);
  ASSERT_TRUE(j);
  EXPECT_EQ(*j, "abc, def");
  const std::array<std::string_view, 2> big{"abcd", "def"};
  auto r = join_field_lines(big, l);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), (Error{ErrorCode::field_too_long, 8}));
  EXPECT_EQ(parse_list(std::span<const std::string_view>(big), l).error().code, ErrorCode::field_too_long);
}

// ---- tree ----

TEST(SfTree, ParsesAllBareItemTypes) {
  auto item = parse_item(R"(1;d=2.5;s="x\"y";t=tok;b=:aGk=:;f=?0;at=@-5;ds=%"%c3%a9")");
  ASSERT_TRUE(item) << describe(item.error());
  EXPECT_EQ(item->bare, BareItem{std::int64_t{1}});
  const Parameters want{{"d", Decimal{2500}},
                        {"s", std::string("x\"y")},
                        {"t", Token{"tok"}},
                        {"b", ByteSequence{{'h', 'i'}}},
                        {"f", false},
                        {"at", Date{-5}},
                        {"ds", DisplayString{"\xc3\xa9"}}};
  EXPECT_EQ(item->params, want);
  EXPECT_EQ(type_of(*find(item->params, "ds")), Type::display_string);
  EXPECT_EQ(find(item->params, "zz"), nullptr);
}

TEST(SfTree, DuplicateKeysKeepLastValueInFirstPosition) {
  auto d = parse_dictionary("a=1, b=2, a=3;x=1;y;x=2");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->size(), 2U);
  EXPECT_EQ((*d)[0].first, "a");
  const auto& a = std::get<Item>((*d)[0].second);
  EXPECT_EQ(a.bare, BareItem{std::int64_t{3}});
  EXPECT_EQ(a.params, (Parameters{{"x", std::int64_t{2}}, {"y", true}}));
  EXPECT_EQ(serialize_dictionary(*d).value(), "a=3;x=2;y, b=2");
  ASSERT_NE(find(*d, "b"), nullptr);
}

TEST(SfTree, MultipleLines) {
  const std::array<std::string_view, 3> lines{"a=1", "b=(x y)", "c"};
  auto d = parse_dictionary(std::span<const std::string_view>(lines));
  ASSERT_TRUE(d);
  EXPECT_EQ(serialize_dictionary(*d).value(), "a=1, b=(x y), c");
  const std::array<std::string_view, 3> gap{"1", "", "2"};
  auto l = parse_list(std::span<const std::string_view>(gap));
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error(), (Error{ErrorCode::invalid_bare_item, 3}));
}

TEST(SfTree, SetReplacesInPlace) {
  Parameters ps{{"a", std::int64_t{1}}, {"b", std::int64_t{2}}};
  set(ps, "a", Token{"z"});
  set(ps, "c", true);
  EXPECT_EQ(ps, (Parameters{{"a", Token{"z"}}, {"b", std::int64_t{2}}, {"c", true}}));
}

// ---- serializer ----

TEST(SfSerialize, CanonicalForms) {
  EXPECT_EQ(serialize_list(parse_list("  a ,\tb;x=?1;y=?0 , ( 1  2 );z=1.500").value()).value(),
            "a, b;x;y=?0, (1 2);z=1.5");
  EXPECT_EQ(serialize_item(Item{Decimal{-1000}, {}}).value(), "-1.0");
  EXPECT_EQ(serialize_item(Item{Decimal{123456789012345}, {}}).value(), "123456789012.345");
  EXPECT_EQ(serialize_item(Item{ByteSequence{{}}, {}}).value(), "::");
  EXPECT_EQ(serialize_item(Item{DisplayString{"a%\"\xc3\xa9\n"}, {}}).value(), R"(%"a%25%22%c3%a9%0a")");
  EXPECT_EQ(serialize_list(List{}).value(), "");
  EXPECT_EQ(serialize_dictionary(Dictionary{}).value(), "");
  EXPECT_EQ(serialize_list(List{InnerList{}}).value(), "()");
  EXPECT_EQ(serialize_bare_item(Date{1659578233}).value(), "@1659578233");
}

TEST(SfSerialize, FailsWhereTheRfcSays) {
  auto fails = [](const Item& item, ErrorCode code) {
    auto r = serialize_item(item);
    ASSERT_FALSE(r) << r.value();
    EXPECT_EQ(r.error().code, code);
  };
  fails(Item{std::int64_t{1'000'000'000'000'000}, {}}, ErrorCode::number_too_long);
  fails(Item{std::int64_t{-1'000'000'000'000'000}, {}}, ErrorCode::number_too_long);
  fails(Item{Decimal{1'000'000'000'000'000}, {}}, ErrorCode::number_too_long);
  fails(Item{std::string("caf\xc3\xa9"), {}}, ErrorCode::invalid_string);
  fails(Item{std::string("a\nb"), {}}, ErrorCode::invalid_string);
  fails(Item{Token{""}, {}}, ErrorCode::invalid_token);
  fails(Item{Token{"1abc"}, {}}, ErrorCode::invalid_token);
  fails(Item{Token{"a b"}, {}}, ErrorCode::invalid_token);
  fails(Item{Date{1'000'000'000'000'000}, {}}, ErrorCode::invalid_date);
  fails(Item{DisplayString{"\xc3"}, {}}, ErrorCode::invalid_display_string);
  fails(Item{DisplayString{"\xed\xa0\x80"}, {}}, ErrorCode::invalid_display_string);
  fails(Item{true, {{"A", true}}}, ErrorCode::invalid_key);
  fails(Item{true, {{"", true}}}, ErrorCode::invalid_key);
  fails(Item{true, {{"a", true}, {"a", false}}}, ErrorCode::invalid_key);
  Dictionary dup{{"a", Item{true, {}}}, {"a", Item{false, {}}}};
  EXPECT_EQ(serialize_dictionary(dup).error().code, ErrorCode::invalid_key);
  Dictionary many;
  for (int i = 0; i < 40; ++i) many.emplace_back("k" + std::to_string(i % 39), Item{true, {}});
  EXPECT_EQ(serialize_dictionary(many).error().code, ErrorCode::invalid_key);
  // The offset says where in the output the bad value would have gone.
  auto r = serialize_list(List{Item{std::int64_t{1}, {}}, Item{Token{"?"}, {}}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), (Error{ErrorCode::invalid_token, 3}));
}

TEST(SfSerialize, DecimalFromDoubleRoundsHalfToEven) {
  auto th = [](double d) { return Decimal::from_double(d).value().thousandths; };
  EXPECT_EQ(th(0.0015), 2);
  EXPECT_EQ(th(0.0025), 2);
  EXPECT_EQ(th(-0.0015), -2);
  EXPECT_EQ(th(-0.0025), -2);
  EXPECT_EQ(th(9.9995), 10000);
  EXPECT_EQ(th(0.0004), 0);
  EXPECT_EQ(th(0.0006), 1);
  EXPECT_EQ(th(0.00005), 0);
  EXPECT_EQ(th(1.1), 1100);
  EXPECT_EQ(th(123456789012.345), 123456789012345);
  EXPECT_EQ(th(0.0), 0);
  EXPECT_FALSE(Decimal::from_double(1e15));
  EXPECT_FALSE(Decimal::from_double(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(Decimal::from_double(std::numeric_limits<double>::quiet_NaN()));
}

// ---- round trip over generated values ----

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  char pick(std::string_view chars) { return chars[below(chars.size())]; }

  std::int64_t number() {
    switch (below(3)) {
      case 0: return between(-100, 100);
      case 1: return between(-999'999'999'999'999, 999'999'999'999'999);
      default: return below(2) ? 999'999'999'999'999 : -999'999'999'999'999;
    }
  }

  std::string key() {
    std::string k(1, pick("abcdefghijklmnopqrstuvwxyz*"));
    for (std::size_t n = below(8); n > 0; --n) k += pick("abcdefghijklmnopqrstuvwxyz0123456789_-.*");
    return k;
  }

  std::string utf8() {
    std::string s;
    for (std::size_t n = below(8); n > 0; --n) {
      std::uint32_t cp = 0;
      switch (below(4)) {
        case 0: cp = static_cast<std::uint32_t>(between(0, 0x7F)); break;
        case 1: cp = static_cast<std::uint32_t>(between(0x80, 0x7FF)); break;
        case 2: cp = static_cast<std::uint32_t>(between(0x800, 0xFFFF)); break;
        default: cp = static_cast<std::uint32_t>(between(0x10000, 0x10FFFF)); break;
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      auto put = [&s](std::uint32_t b) { s += static_cast<char>(b); };
      if (cp < 0x80) {
        put(cp);
      } else if (cp < 0x800) {
        put(0xC0 | (cp >> 6));
        put(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        put(0xE0 | (cp >> 12));
        put(0x80 | ((cp >> 6) & 0x3F));
        put(0x80 | (cp & 0x3F));
      } else {
        put(0xF0 | (cp >> 18));
        put(0x80 | ((cp >> 12) & 0x3F));
        put(0x80 | ((cp >> 6) & 0x3F));
        put(0x80 | (cp & 0x3F));
      }
    }
    return s;
  }

  BareItem bare() {
    switch (below(8)) {
      case 0: return number();
      case 1: return Decimal{between(-999'999'999'999'999, 999'999'999'999'999) / (below(2) ? 1 : 1000)};
      case 2: {
        std::string s;
        for (std::size_t n = below(12); n > 0; --n) s += static_cast<char>(between(0x20, 0x7E));
        return s;
      }
      case 3: {
        std::string t(1, pick("ABCXYZabcxyz*"));
        for (std::size_t n = below(10); n > 0; --n) t += pick("abzAZ09!#$%&'*+-.^_`|~:/");
        return Token{t};
      }
      case 4: {
        ByteSequence b;
        for (std::size_t n = below(20); n > 0; --n) b.bytes.push_back(static_cast<std::uint8_t>(below(256)));
        return b;
      }
      case 5: return below(2) == 1;
      case 6: return Date{number()};
      default: return DisplayString{utf8()};
    }
  }

  Parameters params() {
    Parameters ps;
    for (std::size_t n = below(4); n > 0; --n) set(ps, key(), bare());
    return ps;
  }

  Item item() { return Item{bare(), params()}; }

  ListMember member() {
    if (below(4) != 0) return item();
    InnerList l;
    for (std::size_t n = below(4); n > 0; --n) l.items.push_back(item());
    l.params = params();
    return l;
  }

  List list() {
    List l;
    for (std::size_t n = below(5); n > 0; --n) l.push_back(member());
    return l;
  }

  Dictionary dictionary() {
    Dictionary d;
    for (std::size_t n = below(5); n > 0; --n) set(d, key(), member());
    return d;
  }

 private:
  std::mt19937_64 rng_;
};

TEST(SfRoundTrip, GeneratedValuesSurviveSerializeThenParse) {
  Generator gen(20240917);
  for (int i = 0; i < 3000; ++i) {
    const Item item = gen.item();
    const auto si = serialize_item(item);
    ASSERT_TRUE(si) << describe(si.error());
    const auto pi = parse_item(*si);
    ASSERT_TRUE(pi) << *si << ": " << describe(pi.error());
    EXPECT_EQ(*pi, item) << *si;
    EXPECT_EQ(serialize_item(*pi).value(), *si);

    const List list = gen.list();
    const auto sl = serialize_list(list);
    ASSERT_TRUE(sl) << describe(sl.error());
    const auto pl = parse_list(*sl);
    ASSERT_TRUE(pl) << *sl << ": " << describe(pl.error());
    EXPECT_EQ(*pl, list) << *sl;
    EXPECT_EQ(serialize_list(*pl).value(), *sl);

    const Dictionary dict = gen.dictionary();
    const auto sd = serialize_dictionary(dict);
    ASSERT_TRUE(sd) << describe(sd.error());
    const auto pd = parse_dictionary(*sd);
    ASSERT_TRUE(pd) << *sd << ": " << describe(pd.error());
    EXPECT_EQ(*pd, dict) << *sd;
    EXPECT_EQ(serialize_dictionary(*pd).value(), *sd);
  }
}

// Random text from the characters that matter to the grammar: whatever
// parses must serialize, and the canonical form must parse to the same value.
TEST(SfRoundTrip, RandomTextThatParsesRoundTrips) {
  Generator gen(7);
  constexpr std::string_view kChars = "aZ*09-.;=,() \t\"\\:?@%/_!~+=eE1c3b";
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (std::size_t n = gen.below(16); n > 0; --n) text += gen.pick(kChars);
    auto l = parse_list(text);
    if (l) {
      ++parsed;
      auto s = serialize_list(*l);
      ASSERT_TRUE(s) << text;
      EXPECT_EQ(parse_list(*s).value(), *l) << text << " -> " << *s;
    } else {
      EXPECT_LE(l.error().offset, text.size());
    }
    auto d = parse_dictionary(text);
    if (d) {
      auto s = serialize_dictionary(*d);
      ASSERT_TRUE(s) << text;
      EXPECT_EQ(parse_dictionary(*s).value(), *d) << text << " -> " << *s;
    } else {
      EXPECT_LE(d.error().offset, text.size());
    }
    auto it = parse_item(text);
    if (it) {
      auto s = serialize_item(*it);
      ASSERT_TRUE(s) << text;
      EXPECT_EQ(parse_item(*s).value(), *it) << text << " -> " << *s;
    } else {
      EXPECT_LE(it.error().offset, text.size());
    }
  }
  EXPECT_GT(parsed, 100);
}


// ---- the ASCII helpers every parser shares (src/ascii.h) ----

namespace ascii_tests {

namespace ascii = abide::ascii;

// Compile-time: every helper is usable in a constant expression.
static_assert(ascii::is_digit('0') && ascii::is_digit('9') && !ascii::is_digit('/') && !ascii::is_digit(':'));
static_assert(ascii::is_alpha('a') && ascii::is_alpha('Z') && !ascii::is_alpha('@') && !ascii::is_alpha('['));
static_assert(ascii::is_lower('q') && !ascii::is_lower('Q'));
static_assert(ascii::is_ows(' ') && ascii::is_ows('\t') && !ascii::is_ows('\n'));
static_assert(ascii::is_tchar('~') && !ascii::is_tchar(':'));
static_assert(ascii::to_lower('R') == 'r' && ascii::to_lower('[') == '[');
static_assert(ascii::trim_ows(" \t x y\t ") == "x y");
static_assert(ascii::iequals("Retry-After", "rETRY-aFTER") && !ascii::iequals("Retry-After", "Retry_After"));
static_assert(ascii::istarts_with("X-RateLimit-Reset", "x-ratelimit-"));
static_assert(noexcept(ascii::iequals("", "")) && noexcept(ascii::trim_ows("")) && noexcept(ascii::is_tchar('a')));

// Reference definitions written the slow, obvious way.
bool ref_digit(unsigned c) { return c >= '0' && c <= '9'; }
bool ref_upper(unsigned c) { return c >= 'A' && c <= 'Z'; }
bool ref_lower(unsigned c) { return c >= 'a' && c <= 'z'; }
bool ref_tchar(unsigned c) {
  return ref_digit(c) || ref_upper(c) || ref_lower(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

TEST(Ascii, ClassesMatchTheirGrammarForEveryByte) {
  for (unsigned c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    SCOPED_TRACE(c);
    EXPECT_EQ(ascii::is_digit(ch), ref_digit(c));
    EXPECT_EQ(ascii::is_alpha(ch), ref_upper(c) || ref_lower(c));
    EXPECT_EQ(ascii::is_lower(ch), ref_lower(c));
    EXPECT_EQ(ascii::is_ows(ch), c == ' ' || c == '\t');
    EXPECT_EQ(ascii::is_tchar(ch), ref_tchar(c));
    EXPECT_EQ(ascii::to_lower(ch), ref_upper(c) ? static_cast<char>(c + 32) : ch);
  }
}

TEST(Ascii, TrimOwsDropsOnlySpaceAndTab) {
  EXPECT_EQ(ascii::trim_ows(""), "");
  EXPECT_EQ(ascii::trim_ows(" \t "), "");
  EXPECT_EQ(ascii::trim_ows("\r 5 \n"), "\r 5 \n");  // CR and LF are not OWS
  EXPECT_EQ(ascii::trim_ows("\t120 "), "120");
}

// The run-time path compares eight bytes at a time; every length, and a
// difference at every position, must give the byte-by-byte answer.
TEST(Ascii, IequalsAgreesWithBytewiseFoldingAtEveryLengthAndPosition) {
  const std::string base = "x-ratelimit-remaining-requests-01";
  for (std::size_t n = 0; n <= base.size(); ++n) {
    const std::string a = base.substr(0, n);
    std::string upper = a;
    for (char& c : upper) c = static_cast<char>(ref_lower(static_cast<unsigned char>(c)) ? c - 32 : c);
    EXPECT_TRUE(ascii::iequals(a, upper)) << a;
    if (n < base.size()) {
      EXPECT_FALSE(ascii::iequals(a, base.substr(0, n + 1))) << a;
    }
    for (std::size_t k = 0; k < n; ++k) {
      for (char flip : {char{0x20}, char{0x01}, char{0x40}}) {
        std::string b = upper;
        b[k] = static_cast<char>(b[k] ^ flip);
        const unsigned x = static_cast<unsigned char>(a[k]);
        const unsigned y = static_cast<unsigned char>(b[k]);
        const bool same = ascii::to_lower(static_cast<char>(x)) == ascii::to_lower(static_cast<char>(y)) &&
                          (ref_upper(x) || ref_lower(x) || x == y);
        EXPECT_EQ(ascii::iequals(a, b), same) << a << " vs " << b << " at " << k;
      }
    }
  }
  // Bit 0x20 folds letters only: '@' vs '`', '[' vs '{', and high bytes differ.
  EXPECT_FALSE(ascii::iequals("@[\\]^_@[\\]", "`{|}~\x7f`{|}"));
  EXPECT_FALSE(ascii::iequals("\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1", "\xe1\xe1\xe1\xe1\xe1\xe1\xe1\xe1"));
  EXPECT_TRUE(ascii::iequals("\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1", "\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1"));
}

TEST(Ascii, IstartsWith) {
  EXPECT_TRUE(ascii::istarts_with("RateLimit-Policy", ""));
  EXPECT_TRUE(ascii::istarts_with("RateLimit-Policy", "ratelimit"));
  EXPECT_FALSE(ascii::istarts_with("Rate", "ratelimit"));
  EXPECT_FALSE(ascii::istarts_with("RateLimiT", "ratelimit-"));
}

}  // namespace ascii_tests

// The one UTF-8 validator (utf8.h), used by the Display String scanner and
// by sf_value's serializer: RFC 3629's table, at its edges.
TEST(Utf8, AcceptsTheTableAndRefusesOverlongsSurrogatesAndBeyondTheLastCodePoint) {
  using abide::detail::valid_utf8;
  for (const char* ok : {"", "ascii", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80",
                         "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "caf\xC3\xA9"}) {
    EXPECT_TRUE(valid_utf8(ok)) << ok;
  }
  for (const char* bad : {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
                          "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xC3", "\xE2\x82", "\xC3\x28"}) {
    EXPECT_FALSE(valid_utf8(bad)) << bad;
  }
}

}  // namespace
