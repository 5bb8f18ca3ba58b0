#include "proxy/http1_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace abide::proxy {
namespace {

using namespace std::string_literals;
using ::testing::HasSubstr;
using ::testing::Not;

// A reason the proxy may send: printable ASCII, one sentence, no final period.
bool is_reason(const std::string& r) {
  if (r.empty() || r.back() == '.') return false;
  for (char c : r) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// The status parse_request_head answers (0 when it accepts), checking that
// an error's reason is one the proxy may send.
int status_of(std::string_view head) {
  auto r = parse_request_head(head);
  if (r) return 0;
  EXPECT_TRUE(is_reason(r.error().reason)) << r.error().reason;
  return r.error().status;
}

std::string reason_of(std::string_view head) {
  auto r = parse_request_head(head);
  return r ? std::string() : r.error().reason;
}

// A head with this request line and these field lines, CRLF-delimited.
std::string head_of(std::string_view request_line, std::string_view fields = "Host: a\r\n") {
  return std::string(request_line) + "\r\n" + std::string(fields) + "\r\n";
}

RequestHead request(int minor, std::vector<Header> fields) {
  RequestHead h;
  h.method = "POST";
  h.target = "/";
  h.version_minor = minor;
  h.headers = HeaderList(std::move(fields));
  return h;
}

int framing_status(const RequestHead& h) {
  auto r = body_framing(h);
  if (r) return 0;
  EXPECT_TRUE(is_reason(r.error().reason)) << r.error().reason;
  return r.error().status;
}

// ---- find_head_end ----------------------------------------------------------

TEST(FindHeadEnd, FindsCrlfCrlfAndBareLfEnds) {
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 27u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: a\n\n"), 24u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\n\r\n"), 26u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: a\r\n\n"), 25u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.0\r\n\r\n"), 18u);  // no fields at all
}

TEST(FindHeadEnd, WaitsForTheEmptyLine) {
  EXPECT_EQ(find_head_end(""), std::nullopt);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n"), std::nullopt);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r"), std::nullopt);
  // A CR that is not before an LF ends nothing.
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"), std::nullopt);
}

TEST(FindHeadEnd, SkipsEmptyLinesBeforeTheRequestLine) {
  EXPECT_EQ(find_head_end("\r\n\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 32u);
  EXPECT_EQ(find_head_end("\r\n\r\n"), std::nullopt);
  EXPECT_EQ(find_head_end("\n\n\n"), std::nullopt);
  auto head = parse_request_head("\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(head) << head.error().reason;
  EXPECT_EQ(head->method, "GET");
}

TEST(FindHeadEnd, EndsARunOfEmptyLinesThatNeverStops) {
  std::string junk;
  for (int i = 0; i < 2000; ++i) junk += "\r\n";
  const auto end = find_head_end(junk);
  ASSERT_TRUE(end.has_value());
  EXPECT_GE(*end, 1024u);
  EXPECT_LE(*end, 1026u);
  EXPECT_EQ(status_of(std::string_view(junk).substr(0, *end)), 400);
  // The same answer however the run arrives.
  std::optional<std::size_t> seen;
  for (std::size_t n = 1; n <= junk.size() && !seen; ++n)
    seen = find_head_end(std::string_view(junk).substr(0, n), n - 1);
  EXPECT_EQ(seen, end);
}

TEST(FindHeadEnd, StopsAtTheFirstOfPipelinedHeads) {
  const std::string one = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string two = "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(find_head_end(one + two), one.size());
  EXPECT_EQ(find_head_end(one + two, one.size()), one.size() + two.size());
}

TEST(FindHeadEnd, DoesNotSearchAgainWhatFromSaysWasSearched) {
  // The end lies wholly before from - 2: a call that rescanned would find it.
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\nxyz";
  EXPECT_EQ(find_head_end(head, 0), 27u);
  EXPECT_EQ(find_head_end(head, head.size()), std::nullopt);
  // A from past the data is taken as the data's size.
  EXPECT_EQ(find_head_end("GET", 100), std::nullopt);
}

// Every way of cutting a head in two, and byte by byte, finds the same end.
TEST(FindHeadEnd, FindsTheSameEndInEverySplit) {
  for (const std::string& head : {"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n\r\nBODY"s,
                                  "\r\n\nGET / HTTP/1.1\nHost: a\n\nNEXT"s, "GET / HTTP/1.1\r\nHost: a\n\r\n"s}) {
    const auto whole = find_head_end(head);
    ASSERT_TRUE(whole.has_value()) << head;
    for (std::size_t cut = 0; cut <= head.size(); ++cut) {
      const std::string_view first = std::string_view(head).substr(0, cut);
      const auto early = find_head_end(first);
      if (early) {
        EXPECT_EQ(early, whole) << "cut " << cut;
        continue;
      }
      EXPECT_EQ(find_head_end(head, cut), whole) << "cut " << cut;
    }
    std::optional<std::size_t> seen;
    std::size_t n = 0;
    while (!seen && n < head.size()) {
      ++n;
      seen = find_head_end(std::string_view(head).substr(0, n), n - 1);
    }
    EXPECT_EQ(seen, whole);
    EXPECT_EQ(n, *whole);  // found as soon as its last byte arrived
  }
}

// ---- parse_request_head: the request line -----------------------------------

TEST(ParseRequestHead, ReadsARequest) {
  auto r = parse_request_head(
      "PoSt /v1/chat?x=1&y=%20 HTTP/1.1\r\nHost: api.example.com:8080\r\nX-Empty:\r\nX-Pad: \t a b \t\r\n"
      "x-empty: \r\n\r\n");
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->method, "PoSt");  // methods are case-sensitive: kept as sent
  EXPECT_EQ(r->target, "/v1/chat?x=1&y=%20");
  EXPECT_EQ(r->version_minor, 1);
  ASSERT_EQ(r->headers.size(), 4u);
  EXPECT_EQ(r->headers.lines()[0].name, "Host");
  EXPECT_EQ(r->headers.lines()[0].value, "api.example.com:8080");
  EXPECT_EQ(r->headers.lines()[1].value, "");
  EXPECT_EQ(r->headers.lines()[2].value, "a b");  // OWS around the value dropped, inside kept
  EXPECT_EQ(r->headers.lines()[3].name, "x-empty");
  EXPECT_EQ(r->headers.count("X-EMPTY"), 2u);
}

TEST(ParseRequestHead, AcceptsHttp10WithoutHost) {
  auto r = parse_request_head("GET / HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->version_minor, 0);
  EXPECT_TRUE(r->headers.empty());
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\nHost: a\r\n\r\n"), 0);
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), 400);  // never two
}

TEST(ParseRequestHead, AcceptsBareLfLineEnds) {
  auto r = parse_request_head("GET /x HTTP/1.1\nHost: a\nA: b\n\n");
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->headers.first("A"), "b");
}

TEST(ParseRequestHead, AnswersOtherVersionsWith505AndGarbageWith400) {
  EXPECT_EQ(status_of(head_of("GET / HTTP/2.0")), 505);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.2")), 505);
  EXPECT_EQ(status_of(head_of("GET / HTTP/0.9")), 505);
  EXPECT_THAT(reason_of(head_of("GET / HTTP/3.0")), HasSubstr("HTTP/3.0"));
  for (const char* v :
       {"HTTP/1.10", "http/1.1", "HTTP/1", "HTTP/2", "HTTP/1.1 ", "HTTP/a.b", "HTTPS/1.1", "", "HTTP/1.1\t"}) {
    EXPECT_EQ(status_of(head_of("GET / "s + v)), 400) << v;
  }
}

TEST(ParseRequestHead, RejectsARequestLineWithoutOneSpaceBetweenParts) {
  EXPECT_EQ(status_of(head_of("GET  / HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("GET /  HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of(" GET / HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("GET\t/\tHTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("GET /")), 400);
  EXPECT_EQ(status_of(head_of("GET")), 400);
  EXPECT_EQ(status_of(head_of("")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1\r")), 400);  // CR CR LF: a bare CR
}

TEST(ParseRequestHead, RejectsAMethodThatIsNotAToken) {
  EXPECT_EQ(status_of(head_of("GE(T / HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("G\x80T / HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("G\0T / HTTP/1.1"s)), 400);
  EXPECT_EQ(status_of(head_of("GE\"T / HTTP/1.1")), 400);
  EXPECT_EQ(reason_of(head_of("GE(T / HTTP/1.1")), "the method is not a token");
  EXPECT_EQ(status_of(head_of("M-SEARCH! / HTTP/1.1")), 0);  // any token is a method
}

TEST(ParseRequestHead, ChecksTheOriginFormTarget) {
  EXPECT_EQ(status_of(head_of("GET /a/b;c?d=e&f=/g?h HTTP/1.1")), 0);
  EXPECT_EQ(status_of(head_of("GET a/b HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("GET /a#frag HTTP/1.1")), 400);
  for (char bad : {'\0', '\x01', '\x1f', '\x7f', '\t', '\x80', '\xff'}) {
    std::string line = "GET /a";
    line += bad;
    line += "b HTTP/1.1";
    EXPECT_EQ(status_of(head_of(line)), 400) << int(bad);
  }
}

TEST(ParseRequestHead, KeepsOnlyPathAndQueryOfAnAbsoluteFormTarget) {
  const auto target = [](std::string_view t) {
    auto r = parse_request_head(head_of("GET "s + std::string(t) + " HTTP/1.1"));
    return r ? r->target : "error " + std::to_string(r.error().status);
  };
  EXPECT_EQ(target("http://example.com/a/b?q=1"), "/a/b?q=1");
  EXPECT_EQ(target("https://example.com:8443/a"), "/a");
  EXPECT_EQ(target("HTTP://Example.COM/x"), "/x");  // the scheme is case-insensitive
  EXPECT_EQ(target("http://example.com"), "/");
  EXPECT_EQ(target("http://example.com?q"), "/?q");
  EXPECT_EQ(target("http://user@example.com/p"), "/p");
  EXPECT_EQ(target("http:///path"), "error 400");
  EXPECT_EQ(target("http://"), "error 400");
  EXPECT_EQ(target("ftp://example.com/x"), "error 400");
  EXPECT_EQ(target("example.com/x"), "error 400");
  EXPECT_EQ(target("http://example.com/x#f"), "error 400");
}

TEST(ParseRequestHead, AcceptsTheAsteriskOnlyForOptions) {
  auto r = parse_request_head(head_of("OPTIONS * HTTP/1.1"));
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->target, "*");
  EXPECT_EQ(status_of(head_of("GET * HTTP/1.1")), 400);
  EXPECT_EQ(status_of(head_of("options * HTTP/1.1")), 400);  // methods are case-sensitive
  EXPECT_EQ(status_of(head_of("OPTIONS *x HTTP/1.1")), 400);
}

// Choice: CONNECT is a method the proxy does not implement, so 501 (RFC 9110
// 15.6.2), whatever its target.
TEST(ParseRequestHead, AnswersConnectWith501) {
  EXPECT_EQ(status_of(head_of("CONNECT example.com:443 HTTP/1.1")), 501);
  EXPECT_EQ(reason_of(head_of("CONNECT example.com:443 HTTP/1.1")), "CONNECT is not supported");
  EXPECT_EQ(status_of(head_of("CONNECT / HTTP/1.1")), 501);
  EXPECT_EQ(status_of(head_of("GET example.com:443 HTTP/1.1")), 400);  // authority-form elsewhere
}

// A method no upstream implements for its length: 501 here, not a 502 when
// the transport refuses it.
TEST(ParseRequestHead, AnswersAnOverlongMethodWith501) {
  EXPECT_EQ(status_of(head_of(std::string(8192, 'M') + " / HTTP/1.1")), 501);
  EXPECT_EQ(reason_of(head_of(std::string(33, 'M') + " / HTTP/1.1")), "the method is longer than 32 bytes");
  EXPECT_EQ(status_of(head_of(std::string(32, 'M') + " / HTTP/1.1")), 0);
  EXPECT_EQ(status_of(head_of("VERSION-CONTROL / HTTP/1.1")), 0);
}

// ---- parse_request_head: field lines -----------------------------------------

TEST(ParseRequestHead, RequiresExactlyOneHostInHttp11) {
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "")), 400);
  EXPECT_EQ(reason_of(head_of("GET / HTTP/1.1", "")), "Host is missing");
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "X: y\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nhost: a\r\n")), 400);
  EXPECT_EQ(reason_of(head_of("GET / HTTP/1.1", "Host: a\r\nHOST: b\r\n")), "Host appears more than once");
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host:\r\n")), 0);  // empty: allowed (RFC 9112 3.2)
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: [::1]:8080\r\n")), 0);
  EXPECT_EQ(status_of(head_of("GET http://x/ HTTP/1.1", "")), 400);  // absolute-form needs Host too
}

TEST(ParseRequestHead, RejectsAHostThatIsNotAHostAndPort) {
  for (const char* bad : {"a b", "a/b", "a@b", "a?b", "a#b", "\xc3\xa9.com", "a\"b"}) {
    EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: "s + bad + "\r\n")), 400) << bad;
  }
}

TEST(ParseRequestHead, RejectsObsoleteLineFolding) {
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX: a\r\n b\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX: a\r\n\tb\r\n")), 400);
  // Whitespace right after the request line (RFC 9112 2.2).
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", " Host: a\r\n")), 400);
  EXPECT_THAT(reason_of(head_of("GET / HTTP/1.1", "Host: a\r\nX: a\r\n b\r\n")), HasSubstr("folding"));
}

TEST(ParseRequestHead, RejectsBadFieldNames) {
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX-A : b\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX-A\t: b\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nno colon here\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nNoColon\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\n: empty\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX(A): b\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX\x80: b\r\n")), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX\rY: b\r\n")), 400);
  EXPECT_THAT(reason_of(head_of("GET / HTTP/1.1", "Host: a\r\nX-A : b\r\n")), HasSubstr("whitespace before its colon"));
  EXPECT_EQ(reason_of(head_of("GET / HTTP/1.1", "Host: a\r\nNoColon\r\n")), "a field line has no colon");
  EXPECT_EQ(reason_of(head_of("GET / HTTP/1.1", "Host: a\r\n: v\r\n")), "a field line has an empty name");
}

TEST(ParseRequestHead, RejectsNulInNamesAndValues) {
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX\0Y: b\r\n"s)), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX: a\0b\r\n"s)), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\nX: \0\r\n"s)), 400);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\0\r\n"s)), 400);
}

TEST(ParseRequestHead, RejectsControlBytesInValuesButKeepsObsTextAndTabs) {
  for (int c : {0x01, 0x08, 0x0b, 0x0c, 0x0d, 0x1b, 0x1f, 0x7f}) {
    const std::string field = "X: a"s + static_cast<char>(c) + "b\r\n";
    EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\n" + field)), 400) << c;
  }
  auto r = parse_request_head(head_of("GET / HTTP/1.1", "Host: a\r\nX: caf\xc3\xa9\tand\x80\xff\r\n"));
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->headers.first("X"), "caf\xc3\xa9\tand\x80\xff");
}

TEST(ParseRequestHead, NamesAtMostAValidFieldNameInItsReasons) {
  const std::string secret = "Sekr\x1b[31mT";
  const std::string reason = reason_of(head_of("GET / HTTP/1.1", "Host: a\r\nAuthorization: " + secret + "\r\n"));
  EXPECT_EQ(reason, "the value of Authorization holds a control byte");
  EXPECT_THAT(reason_of(head_of("GET /" + secret + " HTTP/1.1")), Not(HasSubstr("Sekr")));
  // A long name is cut.
  const std::string name(5000, 'N');
  const std::string long_reason = reason_of(head_of("GET / HTTP/1.1", "Host: a\r\n" + name + ": \x01\r\n"));
  EXPECT_TRUE(is_reason(long_reason));
  EXPECT_LT(long_reason.size(), 120u);
}

TEST(ParseRequestHead, LimitsTheNumberOfFields) {
  std::string fields = "Host: a\r\n";
  for (int i = 1; i < 256; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  auto ok = parse_request_head(head_of("GET / HTTP/1.1", fields));
  ASSERT_TRUE(ok) << ok.error().reason;
  EXPECT_EQ(ok->headers.size(), 256u);
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", fields + "X-last: v\r\n")), 431);
}

TEST(ParseRequestHead, NeedsTheEmptyLineAndReadsNothingAfterIt) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1"), 400);
  EXPECT_EQ(status_of(""), 400);
  auto r = parse_request_head("GET / HTTP/1.1\r\nHost: a\r\n\r\n\x01garbage\0 that is a body"s);
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->headers.size(), 1u);
}

TEST(ParseRequestHead, IsSafeOnAHugeHead) {
  const std::string value(1 << 20, 'v');
  auto r = parse_request_head(head_of("GET / HTTP/1.1", "Host: a\r\nBig: " + value + "\r\n"));
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->headers.first("Big")->size(), value.size());
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "A: b\r\n";
  EXPECT_EQ(status_of(head_of("GET / HTTP/1.1", "Host: a\r\n" + many)), 431);
}

// Two requests in one buffer: each head ends where the next begins.
TEST(ParseRequestHead, ReadsPipelinedRequestsOneAfterTheOther) {
  const std::string buffer = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                             "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  const auto end1 = find_head_end(buffer);
  ASSERT_TRUE(end1.has_value());
  auto first = parse_request_head(std::string_view(buffer).substr(0, *end1));
  ASSERT_TRUE(first) << first.error().reason;
  auto framing = body_framing(*first);
  ASSERT_TRUE(framing);
  ASSERT_EQ(framing->kind, BodyFraming::Kind::kLength);
  EXPECT_EQ(std::string_view(buffer).substr(*end1, framing->length), "abc");
  const std::string_view rest = std::string_view(buffer).substr(*end1 + framing->length);
  const auto end2 = find_head_end(rest);
  ASSERT_EQ(end2, rest.size());
  auto second = parse_request_head(rest.substr(0, *end2));
  ASSERT_TRUE(second) << second.error().reason;
  EXPECT_EQ(second->target, "/b");
}

// ---- body_framing ------------------------------------------------------------

TEST(BodyFraming, NoneWithoutEitherField) {
  auto r = body_framing(request(1, {{"Host", "a"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, BodyFraming::Kind::kNone);
}

TEST(BodyFraming, ReadsContentLength) {
  const auto length = [](std::vector<Header> f) -> std::optional<std::uint64_t> {
    auto r = body_framing(request(1, std::move(f)));
    if (!r || r->kind != BodyFraming::Kind::kLength) return std::nullopt;
    return r->length;
  };
  EXPECT_EQ(length({{"Content-Length", "5"}}), 5u);
  EXPECT_EQ(length({{"content-length", "0"}}), 0u);
  EXPECT_EQ(length({{"Content-Length", "5, 5"}}), 5u);
  EXPECT_EQ(length({{"Content-Length", "5,5,5"}}), 5u);
  EXPECT_EQ(length({{"Content-Length", "5"}, {"Content-Length", "5"}}), 5u);
  EXPECT_EQ(length({{"Content-Length", "007"}}), 7u);
  EXPECT_EQ(length({{"Content-Length", "000000000000000000000000000042"}}), 42u);
  EXPECT_EQ(length({{"Content-Length", "999999999999999999"}}), 999999999999999999u);
  EXPECT_EQ(length({{"Content-Length", "9223372036854775807"}}), 9223372036854775807u);
}

TEST(BodyFraming, RejectsAContentLengthThatIsNotDigits) {
  for (const char* bad : {"", "+5", "-5", "0x5", "5 5", "5.0", "five", "5,", ",5", "5,,5", "5;q", "1e3", "\xd9\xa5"}) {
    EXPECT_EQ(framing_status(request(1, {{"Content-Length", bad}})), 400) << bad;
  }
  EXPECT_EQ(body_framing(request(1, {{"Content-Length", "x"}})).error().reason, "Content-Length is not a number");
}

TEST(BodyFraming, RejectsDifferingContentLengths) {
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "5, 6"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "5"}, {"Content-Length", "6"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "5"}, {"Content-Length", "5, 0"}})), 400);
  EXPECT_EQ(body_framing(request(1, {{"Content-Length", "1, 2"}})).error().reason, "Content-Length values differ");
}

TEST(BodyFraming, AnswersAHugeContentLengthWith413) {
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "9223372036854775808"}})), 413);
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "18446744073709551616"}})), 413);
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", std::string(400, '9')}})), 413);
}

TEST(BodyFraming, ReadsChunkedAsTheLastCoding) {
  for (const char* te : {"chunked", "Chunked", "CHUNKED", " chunked ", ", chunked", "chunked,"}) {
    auto r = body_framing(request(1, {{"Transfer-Encoding", te}}));
    ASSERT_TRUE(r) << te << ": " << r.error().reason;
    EXPECT_EQ(r->kind, BodyFraming::Kind::kChunked) << te;
  }
}

TEST(BodyFraming, AnswersOtherCodingsWith501) {
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "gzip, chunked"}})), 501);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}})), 501);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "gzip"}})), 501);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "identity"}})), 501);
  EXPECT_EQ(body_framing(request(1, {{"Transfer-Encoding", "gzip;q=1, chunked"}})).error().reason,
            "transfer coding gzip is not supported");
}

TEST(BodyFraming, RejectsAmbiguousTransferEncodings) {
  // Chunked not last: the body's end cannot be known (RFC 9112 6.3).
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked, gzip"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "gzip"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked, chunked"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked;x=1"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", ""}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", " , "}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "ch unked"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "\"chunked\""}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked\x0b"}})), 400);
}

TEST(BodyFraming, RejectsTransferEncodingWithContentLength) {
  EXPECT_EQ(framing_status(request(1, {{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "chunked"}, {"Content-Length", "0"}})), 400);
  EXPECT_EQ(framing_status(request(1, {{"Transfer-Encoding", "gzip"}, {"Content-Length", "5"}})), 400);
}

TEST(BodyFraming, RejectsTransferEncodingInHttp10) {
  EXPECT_EQ(framing_status(request(0, {{"Transfer-Encoding", "chunked"}})), 400);
  EXPECT_EQ(framing_status(request(0, {{"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}})), 400);
  auto r = body_framing(request(0, {{"Content-Length", "5"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, 5u);
}

// The same smuggling attempts as a caller sends them, through the parser.
TEST(BodyFraming, RejectsSmugglingHeadsEndToEnd) {
  const auto framing_of = [](std::string_view text) {
    auto h = parse_request_head(text);
    if (!h) return h.error().status;
    auto f = body_framing(*h);
    return f ? 0 : f.error().status;
  };
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n \r\n\r\n"), 400);
  EXPECT_EQ(framing_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n"), 0);
}

// ---- keeps_alive and expects_continue ------------------------------------------

TEST(KeepsAlive, FollowsTheVersionAndConnection) {
  EXPECT_TRUE(keeps_alive(request(1, {})));
  EXPECT_FALSE(keeps_alive(request(1, {{"Connection", "close"}})));
  EXPECT_FALSE(keeps_alive(request(1, {{"Connection", "CLOSE"}})));
  EXPECT_FALSE(keeps_alive(request(1, {{"connection", "Upgrade, Close"}})));
  EXPECT_FALSE(keeps_alive(request(1, {{"Connection", "keep-alive"}, {"Connection", "close"}})));
  EXPECT_TRUE(keeps_alive(request(1, {{"Connection", "closed, x-close"}})));
  EXPECT_FALSE(keeps_alive(request(0, {})));
  EXPECT_TRUE(keeps_alive(request(0, {{"Connection", "Keep-Alive"}})));
  EXPECT_TRUE(keeps_alive(request(0, {{"Connection", "te"}, {"Connection", " keep-alive "}})));
  EXPECT_FALSE(keeps_alive(request(0, {{"Connection", "keep-alive, close"}})));
  EXPECT_FALSE(keeps_alive(request(0, {{"Connection", "keep-alive-x"}})));
  EXPECT_FALSE(keeps_alive(request(0, {{"Keep-Alive", "timeout=5"}})));
}

TEST(ExpectsContinue, OnlyForHttp11With100Continue) {
  EXPECT_TRUE(expects_continue(request(1, {{"Expect", "100-continue"}})));
  EXPECT_TRUE(expects_continue(request(1, {{"expect", "100-Continue"}})));
  EXPECT_TRUE(expects_continue(request(1, {{"Expect", "x, 100-continue"}})));
  EXPECT_TRUE(expects_continue(request(1, {{"Expect", "x"}, {"Expect", "100-continue"}})));
  EXPECT_FALSE(expects_continue(request(1, {})));
  EXPECT_FALSE(expects_continue(request(1, {{"Expect", "100-continuer"}})));
  EXPECT_FALSE(expects_continue(request(0, {{"Expect", "100-continue"}})));
}

// ---- ChunkedDecoder --------------------------------------------------------------

struct Decoded {
  ChunkedDecoder::Status status = ChunkedDecoder::Status::kNeedMore;
  std::string body;
  std::size_t consumed = 0;  // of the whole input
  int error = 0;
  std::string reason;
};

// Feeds `in` to a decoder in pieces that end at `cuts` (ascending).
Decoded decode_in_pieces(std::string_view in, const std::vector<std::size_t>& cuts, std::uint64_t max_body = 1 << 20) {
  ChunkedDecoder d(max_body);
  Decoded r;
  std::size_t begin = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(in.size());
  for (std::size_t end : ends) {
    if (end < begin) continue;
    std::size_t used = 0;
    r.status = d.feed(in.substr(begin, end - begin), used, r.body);
    EXPECT_LE(used, end - begin);
    r.consumed = begin + used;
    if (r.status != ChunkedDecoder::Status::kNeedMore) break;
    EXPECT_EQ(used, end - begin);  // a decoder that needs more took everything
    begin = end;
  }
  if (r.status == ChunkedDecoder::Status::kError) {
    r.error = d.error().status;
    r.reason = d.error().reason;
    EXPECT_TRUE(is_reason(r.reason)) << r.reason;
  }
  EXPECT_EQ(d.decoded(), r.body.size());
  EXPECT_LE(d.decoded(), max_body);
  return r;
}

Decoded decode(std::string_view in, std::uint64_t max_body = 1 << 20) { return decode_in_pieces(in, {}, max_body); }

int decode_error(std::string_view in, std::uint64_t max_body = 1 << 20) { return decode(in, max_body).error; }

TEST(ChunkedDecoder, DecodesChunksAndStopsAfterTheLastLine) {
  const std::string body = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  const Decoded r = decode(body + "GET / HTTP/1.1\r\n");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.body, "hello world");
  EXPECT_EQ(r.consumed, body.size());  // the next request is left alone
}

TEST(ChunkedDecoder, ReadsHexSizesExtensionsAndBareLf) {
  Decoded r = decode("A\r\n0123456789\r\n0\r\n\r\n");
  EXPECT_EQ(r.body, "0123456789");
  r = decode("a;name=value;q=\"x;y\"\r\n0123456789\r\n0;last\r\n\r\n");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.body, "0123456789");
  r = decode("3 ; ext\r\nabc\r\n0\r\n\r\n");
  EXPECT_EQ(r.body, "abc");
  r = decode("3\nabc\n0\n\n");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.body, "abc");
  EXPECT_EQ(r.consumed, 9u);
  r = decode("0000000000000000000000003\r\nabc\r\n000\r\n\r\n");  // leading zeros are not digits of size
  EXPECT_EQ(r.body, "abc");
  r = decode("0\r\n\r\n");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.body, "");
}

TEST(ChunkedDecoder, SkipsTrailerFields) {
  const std::string body = "3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-Other: caf\xc3\xa9\r\n\r\n";
  const Decoded r = decode(body + "NEXT");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.body, "abc");
  EXPECT_EQ(r.consumed, body.size());
}

TEST(ChunkedDecoder, DecodesTheSameInEverySplit) {
  const std::string body = "4;x=y\r\nWiki\r\n5\r\npedia\r\nE\n in\r\n\r\nchunks.\n0\r\nT: v\r\n\r\n";
  const std::string in = body + "GET / HTTP/1.1\r\n";
  const Decoded whole = decode(in);
  ASSERT_EQ(whole.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(whole.body, "Wikipedia in\r\n\r\nchunks.");
  EXPECT_EQ(whole.consumed, body.size());
  for (std::size_t cut = 0; cut <= in.size(); ++cut) {
    const Decoded r = decode_in_pieces(in, {cut});
    EXPECT_EQ(r.status, whole.status) << cut;
    EXPECT_EQ(r.body, whole.body) << cut;
    EXPECT_EQ(r.consumed, whole.consumed) << cut;
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < in.size(); ++i) every.push_back(i);
  const Decoded bytewise = decode_in_pieces(in, every);
  EXPECT_EQ(bytewise.status, whole.status);
  EXPECT_EQ(bytewise.body, whole.body);
  EXPECT_EQ(bytewise.consumed, whole.consumed);
}

TEST(ChunkedDecoder, FailsTheSameInEverySplit) {
  const std::string in = "3\r\nabc\r\n4\r\nabcdX\r\n0\r\n\r\n";
  const Decoded whole = decode(in);
  ASSERT_EQ(whole.error, 400);
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < in.size(); ++i) every.push_back(i);
  EXPECT_EQ(decode_in_pieces(in, every).error, 400);
  EXPECT_EQ(decode_in_pieces(in, every).body, "abcabcd");
}

TEST(ChunkedDecoder, RequiresALineEndAfterData) {
  EXPECT_EQ(decode_error("3\r\nabcd\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("3\r\nabc\rX0\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("3\r\nabc0\r\n\r\n"), 400);
}

TEST(ChunkedDecoder, RejectsBadSizeLines) {
  for (const std::string& bad :
       std::vector<std::string>{"\r\nabc\r\n0\r\n\r\n", "x\r\n", "-1\r\n", "+1\r\n", "0x3\r\nabc\r\n", " 3\r\nabc\r\n",
                                "3 \r\nabc\r\n", "3 x\r\nabc\r\n", "3\rabc\r\n", "3\r\r\nabc\r\n", "3\0\r\n"s,
                                "3;a\0\r\n"s, "3;a\x01\r\n", "3;a\x7f\r\n", ";\r\n"}) {
    EXPECT_EQ(decode_error(bad), 400) << bad;
  }
}

TEST(ChunkedDecoder, BoundsTheSizeLine) {
  EXPECT_EQ(decode(std::string(4095, '0') + "\r\n\r\n").status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(decode_error(std::string(5000, '0') + "\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("1;" + std::string(5000, 'e') + "\r\nx\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("1" + std::string(5000, ' ') + ";\r\nx\r\n0\r\n\r\n"), 400);
}

TEST(ChunkedDecoder, RejectsASizeOfMoreThan16HexDigits) {
  EXPECT_EQ(decode_error("10000000000000000\r\n"), 400);  // 2^64: 17 digits
  EXPECT_EQ(decode_error("fffffffffffffffff\r\n", std::numeric_limits<std::uint64_t>::max()), 400);
  EXPECT_EQ(decode("10000000000000000\r\n").reason, "a chunk size is too large");
}

TEST(ChunkedDecoder, AnswersABodyOverTheLimitWith413) {
  EXPECT_EQ(decode("a\r\n0123456789\r\n0\r\n\r\n", 10).status, ChunkedDecoder::Status::kDone);
  const Decoded over = decode("a\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n", 10);
  EXPECT_EQ(over.error, 413);
  EXPECT_EQ(over.body, "0123456789");
  EXPECT_EQ(decode_error("b\r\n0123456789a\r\n0\r\n\r\n", 10), 413);
  // A size that would wrap the total around, refused before its data.
  const Decoded huge = decode("ffffffffffffffff\r\nabc", 1 << 20);
  EXPECT_EQ(huge.error, 413);
  EXPECT_EQ(huge.body, "");
  const Decoded wrap = decode("2\r\nab\r\nffffffffffffffff\r\n", std::numeric_limits<std::uint64_t>::max() - 1);
  EXPECT_EQ(wrap.error, 413);
  // With no limit to speak of, the largest size simply waits for its data.
  EXPECT_EQ(decode("ffffffffffffffff\r\nabc", std::numeric_limits<std::uint64_t>::max()).status,
            ChunkedDecoder::Status::kNeedMore);
}

TEST(ChunkedDecoder, BoundsAndChecksTheTrailer) {
  std::string trailer;
  while (trailer.size() < 8000) trailer += "X-Pad: " + std::string(50, 'p') + "\r\n";
  EXPECT_EQ(decode("0\r\n" + trailer + "\r\n").status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(decode_error("0\r\n" + trailer + trailer + "\r\n"), 400);
  EXPECT_EQ(decode_error("0\r\n" + std::string(9000, 't')), 400);  // one endless line
  EXPECT_EQ(decode_error("0\r\nX: a\0b\r\n\r\n"s), 400);
  EXPECT_EQ(decode_error("0\r\nX: a\x1b\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("0\r\nX: a\rb\r\n\r\n"), 400);
  EXPECT_EQ(decode_error("0\r\n\rX"), 400);
}

TEST(ChunkedDecoder, StaysDoneOrFailedOnceThere) {
  ChunkedDecoder d(100);
  std::string out;
  std::size_t used = 0;
  EXPECT_EQ(d.feed("0\r\n\r\nrest", used, out), ChunkedDecoder::Status::kDone);
  EXPECT_EQ(used, 5u);
  EXPECT_EQ(d.feed("1\r\nx\r\n", used, out), ChunkedDecoder::Status::kDone);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(out, "");

  ChunkedDecoder bad(100);
  EXPECT_EQ(bad.feed("2\r\nab", used, out), ChunkedDecoder::Status::kNeedMore);
  EXPECT_EQ(used, 5u);
  EXPECT_EQ(bad.feed("zz", used, out), ChunkedDecoder::Status::kError);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(bad.error().status, 400);
  EXPECT_EQ(bad.feed("\r\n0\r\n\r\n", used, out), ChunkedDecoder::Status::kError);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(out, "ab");

  ChunkedDecoder empty(100);
  EXPECT_EQ(empty.feed("", used, out), ChunkedDecoder::Status::kNeedMore);
  EXPECT_EQ(used, 0u);
}

}  // namespace
}  // namespace abide::proxy
