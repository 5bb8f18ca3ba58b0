// Waits stated in a limited answer's body (src/body_hint.h): Gemini's and
// Vertex AI's google.rpc.RetryInfo, the "try again in 1.5s" of OpenAI's and
// Anthropic's error messages, the order of the kinds, rounding up, the cap,
// and hostile values that must give no hint at all (never "send now").
#include "body_hint.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace abide::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::array<BodyHintKind, 1> kGoogle = {BodyHintKind::kGoogleRetryInfo};
constexpr std::array<BodyHintKind, 1> kSentence = {BodyHintKind::kTryAgainSentence};
constexpr std::array<BodyHintKind, 2> kBoth = {BodyHintKind::kGoogleRetryInfo, BodyHintKind::kTryAgainSentence};

// A Gemini 429 body with one RetryInfo detail.
std::string gemini(std::string_view delay) {
  return R"({"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",)"
         R"("details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},)"
         R"({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":")" +
         std::string(delay) + R"("}]}})";
}

std::optional<Duration> google_wait(std::string_view delay) {
  const auto h = read_body_hint(kGoogle, gemini(delay));
  return h ? std::optional<Duration>(h->wait) : std::nullopt;
}

std::optional<Duration> sentence_wait(std::string_view body) {
  const auto h = read_body_hint(kSentence, body);
  return h ? std::optional<Duration>(h->wait) : std::nullopt;
}

// An OpenAI 429 body whose message says when to try again.
std::string openai_error(std::string_view message) {
  return R"({"error":{"message":")" + std::string(message) +
         R"(","type":"tokens","param":null,"code":"rate_limit_exceeded"}})";
}

bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  }
  return true;
}

// ---- google_retry_info ------------------------------------------------------------------

TEST(GoogleRetryInfo, ProtobufDurationsAreReadExactly) {
  EXPECT_EQ(google_wait("52s"), 52s);
  EXPECT_EQ(google_wait("0.5s"), 500ms);
  EXPECT_EQ(google_wait("1.000340s"), 1000340us);
  EXPECT_EQ(google_wait("0.000000001s"), 1ns);
  EXPECT_EQ(google_wait("0s"), 0ns);
  const auto h = read_body_hint(kGoogle, gemini("52s"));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->source, "body: error.details[].retryDelay \"52s\"");
}

TEST(GoogleRetryInfo, MoreFractionDigitsRoundUpNeverDown) {
  EXPECT_EQ(google_wait("1.0000000001s"), 1s + 1ns);
  EXPECT_EQ(google_wait("0.1234567891s"), 123456790ns);
}

TEST(GoogleRetryInfo, GarbageNegativeNanAndOverflowGiveNothing) {
  for (const std::string_view bad :
       {"-5s", "1e400s", "NaNs", "nans", "Infinitys", "", "s", "52", "52 s", " 52s", "52S", "5.s", ".5s", "+5s",
        "0x10s", "5s5s", "99999999999999999999999s", "1.5ms", "--1s"}) {
    EXPECT_EQ(google_wait(bad), std::nullopt) << bad;
  }
}

TEST(GoogleRetryInfo, CappedAtADay) {
  EXPECT_EQ(google_wait("86400s"), 24h);
  EXPECT_EQ(google_wait("315576000s"), kMaxBodyHintWait);
}

TEST(GoogleRetryInfo, OnlyRetryInfoDetailsCountAndTheLongestWins) {
  EXPECT_FALSE(read_body_hint(kGoogle, R"({"error":{"details":[{"@type":"x.RetryInfo","retryDelay":"5s"}]}})"));
  EXPECT_FALSE(read_body_hint(kGoogle, R"({"error":{"details":{"retryDelay":"5s"}}})"));
  EXPECT_FALSE(read_body_hint(kGoogle, R"({"retryDelay":"5s"})"));
  const auto two = read_body_hint(kGoogle, R"({"error":{"details":[
      {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"},
      {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-9s"},
      {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7.5s"}]}})");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->wait, 7500ms);
}

// Vertex AI's streaming endpoints answer with an array of error objects.
TEST(GoogleRetryInfo, AnArrayOfErrorObjects) {
  const auto h = read_body_hint(kGoogle, "[" + gemini("12s") + "]");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->wait, 12s);
}

TEST(GoogleRetryInfo, NotJsonGivesNothing) {
  EXPECT_FALSE(read_body_hint(kGoogle, R"(retryDelay: "52s" type.googleapis.com/google.rpc.RetryInfo)"));
  EXPECT_FALSE(read_body_hint(kGoogle, gemini("52s").substr(1)));
}

// ---- try_again_sentence -------------------------------------------------------------------

TEST(TryAgainSentence, GoDurationsInTheErrorMessage) {
  EXPECT_EQ(sentence_wait(openai_error("Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, "
                                       "Used 29000, Requested 1500. Please try again in 1.5s. Visit "
                                       "https://platform.openai.com/account/rate-limits to learn more.")),
            1500ms);
  EXPECT_EQ(sentence_wait(openai_error("Please try again in 20ms.")), 20ms);
  EXPECT_EQ(sentence_wait(openai_error("Please try again in 6m0s.")), 6min);
  EXPECT_EQ(sentence_wait(openai_error("Please try again in 1m30.5s")), 90500ms);
  EXPECT_EQ(sentence_wait(openai_error("please TRY AGAIN IN 2S")), 2s);
  EXPECT_EQ(sentence_wait(openai_error("Please try again in 1h2m3.25s, thanks")), 1h + 2min + 3250ms);
  EXPECT_EQ(sentence_wait(openai_error("try again in 0.0001ms")), 100ns);
  const auto h = read_body_hint(kSentence, openai_error("Please try again in 1.5s. Visit the page."));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->source, "body: \"try again in 1.5s\"");
}

TEST(TryAgainSentence, FractionsRoundUp) {
  EXPECT_EQ(sentence_wait(openai_error("try again in 1.0000000001s")), 1s + 1ns);
}

TEST(TryAgainSentence, AnAnthropicErrorAndATopLevelMessage) {
  EXPECT_EQ(sentence_wait(R"({"type":"error","error":{"type":"rate_limit_error","message":"try again in 3s"}})"), 3s);
  EXPECT_EQ(sentence_wait(R"({"message":"Please try again in 4s"})"), 4s);
}

TEST(TryAgainSentence, ARawBodyWhenNotJson) {
  EXPECT_EQ(sentence_wait("Too many requests. Please try again in 250ms."), 250ms);
  // Invalid UTF-8 around it does not hide it.
  EXPECT_EQ(sentence_wait("\xff\xfe bad bytes \xc3( try again in 2s \xed\xa0\x80"), 2s);
}

// Only the message of a JSON body is searched: other members are not the server's words.
TEST(TryAgainSentence, OtherJsonMembersAreNotSearched) {
  EXPECT_FALSE(read_body_hint(kSentence, R"({"error":{"message":"slow down","param":"try again in 9s"}})"));
  EXPECT_FALSE(read_body_hint(kSentence, R"({"prompt":"try again in 9s"})"));
}

TEST(TryAgainSentence, SeveralSentencesTheLongestWins) {
  EXPECT_EQ(sentence_wait("try again in 2s; or try again in 5s; try again in 1s"), 5s);
}

TEST(TryAgainSentence, GarbageNegativeAndOverflowGiveNothing) {
  for (const std::string_view bad :
       {"try again in later", "try again in -5s", "try again in 5 seconds", "try again in s", "try again in .s",
        "try again in 1e400s", "try again in NaNs", "try again in 5", "try again in",
        "try again in 99999999999999999999999h", "try again in 1.5.5s", "try again later in 5s", "retry in 5s"}) {
    EXPECT_FALSE(read_body_hint(kSentence, bad)) << bad;
    EXPECT_FALSE(read_body_hint(kSentence, openai_error(bad))) << bad;
  }
}

TEST(TryAgainSentence, CappedAtADay) { EXPECT_EQ(sentence_wait("try again in 1000h"), kMaxBodyHintWait); }

TEST(TryAgainSentence, TheSourceIsPrintableAndShort) {
  const auto micro = read_body_hint(kSentence, "try again in 5\xC2\xB5s\x1b[2J");
  ASSERT_TRUE(micro);
  EXPECT_EQ(micro->wait, 5us);
  EXPECT_TRUE(printable_ascii(micro->source)) << micro->source;
  const auto long_one = read_body_hint(kSentence, "try again in 1." + std::string(50, '0') + "1s");
  ASSERT_TRUE(long_one);
  EXPECT_EQ(long_one->wait, 1s + 1ns);
  EXPECT_LE(long_one->source.size(), 100u);
  EXPECT_TRUE(printable_ascii(long_one->source));
}

// A duration too long to read whole is not read in part: its prefix could be shorter.
TEST(TryAgainSentence, ADurationTooLongToReadGivesNothing) {
  std::string many;
  for (int i = 0; i < 40; ++i) many += "1h";
  EXPECT_FALSE(read_body_hint(kSentence, "try again in " + many));
}

// ---- kinds ----------------------------------------------------------------------------------

TEST(BodyHintKinds, TriedInTheOrderGiven) {
  const std::string body = R"({"error":{"message":"Please try again in 9s",)"
                           R"("details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}})";
  EXPECT_EQ(read_body_hint(kBoth, body)->wait, 2s);
  constexpr std::array<BodyHintKind, 2> reversed = {BodyHintKind::kTryAgainSentence, BodyHintKind::kGoogleRetryInfo};
  EXPECT_EQ(read_body_hint(reversed, body)->wait, 9s);
  // A kind that reads nothing passes to the next one.
  EXPECT_EQ(read_body_hint(kBoth, openai_error("try again in 3s"))->wait, 3s);
}

TEST(BodyHintKinds, NoKindsOrAnOversizeBodyGiveNothing) {
  EXPECT_FALSE(read_body_hint({}, gemini("5s")));
  EXPECT_FALSE(read_body_hint(kSentence, ""));
  const std::string huge = "try again in 5s" + std::string(kMaxBodyHintBytes, ' ');
  EXPECT_FALSE(read_body_hint(kSentence, huge));
}

TEST(BodyHintKinds, DeepJsonIsNotJson) {
  const std::string deep = std::string(200, '[') + "\"try again in 4s\"" + std::string(200, ']');
  EXPECT_FALSE(read_body_hint(kGoogle, deep));
  // Too deep to be read as JSON, so the raw text is searched.
  EXPECT_EQ(sentence_wait(deep), 4s);
}

}  // namespace
}  // namespace abide::detail
