// The CLI's structured-field commands: abide parse sf, abide format sf.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace {

using abide::test::abide;
using nlohmann::json;
using testing::HasSubstr;

TEST(CliSf, ParsePrintsTheSuiteJsonForm) {
  auto r = abide({"parse", "sf", "--type", "list", R"("burst";q=100;w=60, tok;x=1.5, (1 2);p)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(R"([
    ["burst", [["q", 100], ["w", 60]]],
    [{"__type": "token", "value": "tok"}, [["x", 1.5]]],
    [[[1, []], [2, []]], [["p", true]]]
  ])"));
}

TEST(CliSf, TypedWrappers) {
  auto r = abide({"parse", "sf", "--type", "dictionary", R"(b=:aGVsbG8=:, d=@1659578233, s=%"f%c3%bc%c3%bc", t=a/b)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(R"([
    ["b", [{"__type": "binary", "value": "NBSWY3DP"}, []]],
    ["d", [{"__type": "date", "value": 1659578233}, []]],
    ["s", [{"__type": "displaystring", "value": "füü"}, []]],
    ["t", [{"__type": "token", "value": "a/b"}, []]]
  ])"));
}

TEST(CliSf, SeveralValuesAreSeveralFieldLines) {
  auto r = abide({"parse", "sf", "--type", "list", "--serialize", "a;x=1", "b,  c"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "a;x=1, b, c\n");
}

TEST(CliSf, SerializePrintsCanonicalForm) {
  auto r = abide({"parse", "sf", "--type", "item", "--serialize", "--", "-1.500;a=?1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "-1.5;a\n");
}

TEST(CliSf, RejectedInputSaysWhatAndWhere) {
  auto r = abide({"parse", "sf", "--type", "item", R"("abc)"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("invalid string"));
  EXPECT_THAT(r.err, HasSubstr("at byte 4"));
  EXPECT_TRUE(r.out.empty());

  auto two = abide({"parse", "sf", "--type", "list", "a", "b c"});
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_THAT(two.err, HasSubstr("at byte 5 (line 2, byte 2)"));
}

TEST(CliSf, UsageErrors) {
  EXPECT_EQ(abide({"parse", "sf", "a"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "sf", "--type", "tuple", "a"}).exit_code, 2);
  EXPECT_EQ(abide({"parse", "sf", "--type", "item"}).exit_code, 2);
  EXPECT_EQ(abide({"format", "sf", "--type", "map", "[]"}).exit_code, 2);
}

TEST(CliSf, FormatSerializesJson) {
  auto r = abide(
      {"format", "sf", "--type", "dictionary",
       R"([["a", [1, []]], ["b", [true, [["q", 0.0025]]]], ["c", [[[{"__type":"token","value":"x"}, []]], []]]])"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "a=1, b;q=0.002, c=(x)\n");

  auto in = abide({"format", "sf", "--type", "item"}, R"([{"__type": "binary", "value": "NBSWY3DP"}, []])");
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out, ":aGVsbG8=:\n");

  auto empty = abide({"format", "sf", "--type", "list", "[]"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "\n");
}

TEST(CliSf, FormatFailsWhenTheValueCannotBeSerialized) {
  auto big = abide({"format", "sf", "--type", "item", "[1000000000000000, []]"});
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_THAT(big.err, HasSubstr("number too long"));
  EXPECT_EQ(abide({"format", "sf", "--type", "item", R"([{"__type":"token","value":"1a"}, []])"}).exit_code, 1);
  EXPECT_EQ(abide({"format", "sf", "--type", "list", R"([["x", [["K", 1]]]])"}).exit_code, 1);
  EXPECT_EQ(abide({"format", "sf", "--type", "item", "[1, 2, 3]"}).exit_code, 1);
  auto bad_json = abide({"format", "sf", "--type", "item", "[1,"});
  EXPECT_EQ(bad_json.exit_code, 1);
  EXPECT_THAT(bad_json.err, HasSubstr("JSON"));
}

TEST(CliSf, ParseThenFormatRoundTrips) {
  const std::string value = R"(a=("x\"y" :AAE=:;k=?0);q=-0.25, b=%"%e2%82%ac", c=@-1)";
  auto parsed = abide({"parse", "sf", "--type", "dictionary", value});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  auto formatted = abide({"format", "sf", "--type", "dictionary", parsed.out});
  ASSERT_EQ(formatted.exit_code, 0) << formatted.err;
  EXPECT_EQ(formatted.out, value + "\n");
}

}  // namespace

#endif  // ABIDE_CLI_PATH
