// The own HTTP/2 client's protocol rules (src/h2/session.*), against an
// nghttp2 server session in memory (support/h2_peer.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "h2/session.h"
#include "support/h2_peer.h"

namespace abide {
namespace {

using test::H2Peer;
using test::StreamLog;

h2::RequestHead get(std::string_view path, std::span<const h2::Field> fields = {}) {
  return {"GET", "https", "api.example:8443", path, fields};
}

TEST(H2Session, ARequestHearsItsHeadBodyAndCleanEnd) {
  h2::Session s({});
  H2Peer peer;
  const std::vector<h2::Field> fields = {
      {"X-Custom", "v"}, {"Connection", "keep-alive"}, {"Host", "elsewhere"}, {"TE", "gzip"}, {"Keep-Alive", "5"},
      {"Transfer-Encoding", "chunked"}, {"Upgrade", "h2c"}, {"Accept", "*/*"}};
  StreamLog a;
  ASSERT_EQ(a.open(s, get("/v1/things?x=1", fields)), 1);
  peer.exchange(s);

  ASSERT_TRUE(peer.requests().contains(1));
  const auto& seen = peer.requests()[1].fields;
  EXPECT_EQ(seen.at(":method"), "GET");
  EXPECT_EQ(seen.at(":authority"), "api.example:8443");
  EXPECT_EQ(seen.at(":path"), "/v1/things?x=1");
  EXPECT_EQ(seen.at("x-custom"), "v");  // lowercase, as HTTP/2 requires
  EXPECT_EQ(seen.at("accept"), "*/*");
  for (const char* gone : {"connection", "host", "te", "keep-alive", "transfer-encoding", "upgrade", "X-Custom"})
    EXPECT_FALSE(seen.contains(gone)) << gone;
  EXPECT_TRUE(peer.requests()[1].ended);  // no body: the head ends the request

  peer.head(1, 200, {{"content-type", "text/plain"}, {"retry-after", "3"}});
  peer.body(1, "hello");
  peer.exchange(s);
  EXPECT_EQ(a.heads, std::vector<int>{200});
  EXPECT_EQ(a.field("content-type"), "text/plain");
  EXPECT_EQ(a.field("retry-after"), "3");
  EXPECT_EQ(a.body, "hello");
  ASSERT_TRUE(a.end.has_value());
  EXPECT_TRUE(a.end->complete);
  EXPECT_EQ(a.end->code, 0u);
  EXPECT_EQ(s.open_streams(), 0u);
}

TEST(H2Session, TeTrailersIsTheOneTeKept) {
  h2::Session s({});
  H2Peer peer;
  const std::vector<h2::Field> fields = {{"te", "Trailers"}};
  StreamLog a;
  a.open(s, get("/", fields));
  peer.exchange(s);
  EXPECT_EQ(peer.requests()[1].fields.at("te"), "Trailers");
}

TEST(H2Session, ABodyGoesOutWholePastTheServersWindow) {
  h2::Session s({});
  H2Peer peer;
  std::string body(200 * 1024, 'b');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  StreamLog a;
  a.open(s, {"POST", "https", "h", "/upload", {}}, body);
  peer.exchange(s);
  EXPECT_EQ(peer.requests()[1].body, body);  // past the 64 KiB initial window: WINDOW_UPDATEs let it on
  EXPECT_TRUE(peer.requests()[1].ended);
}

TEST(H2Session, InformationalHeadsComeBeforeTheFinalOne) {
  h2::Session s({});
  H2Peer peer;
  StreamLog a;
  a.open(s, get("/"));
  peer.exchange(s);
  peer.head(1, 103, {{"link", "</a.css>; rel=preload"}});
  peer.head(1, 200, {{"x-final", "1"}});
  peer.body(1, "ok");
  peer.exchange(s);
  EXPECT_EQ(a.heads, (std::vector<int>{103, 200}));
  EXPECT_EQ(a.field("x-final"), "1");
  EXPECT_EQ(a.field("link"), "<none>");  // the final head's fields only
  ASSERT_TRUE(a.end.has_value());
  EXPECT_TRUE(a.end->complete);
}

TEST(H2Session, TrailersAreNotAHead) {
  h2::Session s({});
  H2Peer peer;
  StreamLog a;
  a.open(s, get("/"));
  peer.exchange(s);
  peer.head(1, 200, {{"x-head", "1"}});
  peer.body(1, "data", /*end=*/false);
  peer.exchange(s);  // (nghttp2 sends trailers submitted earlier ahead of the data)
  peer.trailers(1, {{"x-trailer", "2"}});
  peer.exchange(s);
  EXPECT_EQ(a.heads, std::vector<int>{200});
  EXPECT_EQ(a.field("x-head"), "1");
  EXPECT_EQ(a.body, "data");
  ASSERT_TRUE(a.end.has_value());
  EXPECT_TRUE(a.end->complete);
}

TEST(H2Session, GoawayRefusesTheStreamsAboveItsLast) {
  h2::Session s({});
  H2Peer peer;
  StreamLog a, b;
  ASSERT_EQ(a.open(s, get("/a")), 1);
  ASSERT_EQ(b.open(s, get("/b")), 3);
  peer.exchange(s);
  peer.goaway(1);
  peer.exchange(s);
  ASSERT_TRUE(b.end.has_value());
  EXPECT_FALSE(b.end->complete);
  EXPECT_TRUE(b.end->refused);  // not processed: safe to send again, POST too
  EXPECT_FALSE(a.end.has_value());  // at or below the last id: still answered
  EXPECT_FALSE(s.can_open());
  StreamLog c;
  EXPECT_EQ(c.open(s, get("/c")), 0);
  EXPECT_NE(s.error().find("going away"), std::string::npos);

  peer.head(1, 200, {});
  peer.body(1, "last");
  peer.exchange(s);
  ASSERT_TRUE(a.end.has_value());
  EXPECT_TRUE(a.end->complete);
  EXPECT_EQ(a.body, "last");
  EXPECT_TRUE(s.finished());
}

TEST(H2Session, AResetBeforeAnyAnswerIsARefusalOnlyWhenItSaysSo) {
  h2::Session s({});
  H2Peer peer;
  StreamLog refused, failed, cut;
  refused.open(s, get("/1"));
  failed.open(s, get("/2"));
  cut.open(s, get("/3"));
  peer.exchange(s);
  peer.reset(1, NGHTTP2_REFUSED_STREAM);
  peer.reset(3, NGHTTP2_INTERNAL_ERROR);
  peer.head(5, 200, {});
  peer.body(5, "part", /*end=*/false);
  peer.exchange(s);
  peer.reset(5, NGHTTP2_REFUSED_STREAM);  // after an answer began: it was processed
  peer.exchange(s);

  ASSERT_TRUE(refused.end && failed.end && cut.end);
  EXPECT_TRUE(refused.end->refused);
  EXPECT_FALSE(refused.end->complete);
  EXPECT_FALSE(failed.end->refused);
  EXPECT_FALSE(failed.end->complete);
  EXPECT_NE(failed.end->why.find("INTERNAL_ERROR"), std::string::npos) << failed.end->why;
  EXPECT_FALSE(cut.end->refused);
  EXPECT_FALSE(cut.end->complete);
  EXPECT_EQ(cut.body, "part");
  EXPECT_TRUE(s.can_open());  // the connection itself is fine
}

TEST(H2Session, AnOversizedHeadResetsItsStreamAlone) {
  h2::Session s({.stream_window = 65535, .max_head_bytes = 1024, .max_streams = 100});
  H2Peer peer;
  StreamLog big, small;
  big.open(s, get("/big"));
  small.open(s, get("/small"));
  peer.exchange(s);
  peer.head(1, 200, {{"x-pad", std::string(600, 'p')}, {"x-pad2", std::string(600, 'q')}});
  peer.head(3, 200, {{"x-ok", "1"}});
  peer.body(3, "fine");
  peer.exchange(s);

  ASSERT_TRUE(big.end.has_value());
  EXPECT_FALSE(big.end->complete);
  EXPECT_TRUE(big.heads.empty());
  EXPECT_NE(big.end->why.find("passed 1024 bytes"), std::string::npos) << big.end->why;
  EXPECT_NE(peer.requests()[1].reset, 0xffffffffu);  // the server was told
  ASSERT_TRUE(small.end.has_value());
  EXPECT_TRUE(small.end->complete);
  EXPECT_EQ(small.body, "fine");
}

TEST(H2Session, ASlowReaderHoldsItsOwnStreamAndNoOther) {
  h2::Session s({.stream_window = 16384, .max_head_bytes = 65536, .max_streams = 100});
  H2Peer peer;
  StreamLog slow, quick;
  slow.consume_at_once = false;
  slow.open(s, get("/slow"));
  quick.open(s, get("/quick"));
  peer.exchange(s);
  const std::string big(100 * 1024, 'x');
  peer.head(1, 200, {});
  peer.body(1, big);
  peer.head(3, 200, {});
  peer.body(3, big);
  peer.exchange(s);

  EXPECT_EQ(slow.body.size(), 16384u);  // its window, and not a byte more
  EXPECT_FALSE(slow.end.has_value());
  ASSERT_TRUE(quick.end.has_value());  // the connection's window was not held up
  EXPECT_TRUE(quick.end->complete);
  EXPECT_EQ(quick.body.size(), big.size());

  for (int i = 0; i < 20 && !slow.end; ++i) {
    slow.consume_all();
    peer.exchange(s);
  }
  ASSERT_TRUE(slow.end.has_value());
  EXPECT_TRUE(slow.end->complete);
  EXPECT_EQ(slow.body, big);
}

TEST(H2Session, ACancelledStreamHearsNothingMore) {
  h2::Session s({});
  H2Peer peer;
  StreamLog a, b;
  a.open(s, get("/a"));
  b.open(s, get("/b"));
  peer.exchange(s);
  peer.head(1, 200, {});
  peer.body(1, "late");  // on its way when the client gives up
  s.cancel(1);
  peer.exchange(s);
  EXPECT_TRUE(a.heads.empty());
  EXPECT_TRUE(a.body.empty());
  EXPECT_FALSE(a.end.has_value());
  EXPECT_EQ(peer.requests()[1].reset, static_cast<std::uint32_t>(NGHTTP2_CANCEL));
  EXPECT_EQ(s.open_streams(), 1u);  // b
  peer.head(3, 200, {});
  peer.body(3, "b");
  peer.exchange(s);
  ASSERT_TRUE(b.end.has_value());
  EXPECT_TRUE(b.end->complete);
  EXPECT_EQ(s.open_streams(), 0u);
}

TEST(H2Session, ACancelledUploadStopsSendingItsBody) {
  h2::Session s({});
  H2Peer peer;
  std::string body(300 * 1024, 'u');
  StreamLog a;
  a.open(s, {"POST", "https", "h", "/up", {}}, body);
  peer.exchange(s);  // the server's window lets 64 KiB through, then WINDOW_UPDATEs
  s.cancel(1);
  body.assign(body.size(), 'X');  // whatever the session still read would be these
  peer.exchange(s);
  EXPECT_EQ(peer.requests()[1].body.find('X'), std::string::npos);
  EXPECT_EQ(s.open_streams(), 0u);
}

TEST(H2Session, TheServersStreamLimitBoundsCanOpen) {
  h2::Session s({});
  H2Peer peer(/*max_streams=*/2);
  StreamLog warm;
  warm.open(s, get("/warm"));
  peer.exchange(s);  // the server's SETTINGS arrive
  peer.head(1, 200, {});
  peer.body(1, "");
  peer.exchange(s);
  ASSERT_TRUE(warm.end && warm.end->complete);

  StreamLog a, b;
  EXPECT_TRUE(s.can_open());
  a.open(s, get("/a"));
  EXPECT_TRUE(s.can_open());
  b.open(s, get("/b"));
  EXPECT_FALSE(s.can_open());  // two open: the server's limit
  peer.exchange(s);
  peer.head(3, 200, {});
  peer.body(3, "");
  peer.exchange(s);
  EXPECT_TRUE(s.can_open());
}

TEST(H2Session, OwnStreamLimitBoundsCanOpen) {
  h2::Session s({.stream_window = 65535, .max_head_bytes = 65536, .max_streams = 1});
  StreamLog a;
  EXPECT_TRUE(s.can_open());
  a.open(s, get("/a"));
  EXPECT_FALSE(s.can_open());
}

TEST(H2Session, GarbageFromTheServerEndsEveryStream) {
  h2::Session s({});
  StreamLog a, b;
  a.open(s, get("/a"));
  b.open(s, get("/b"));
  std::string ignored;
  ASSERT_TRUE(s.produce(ignored, 1 << 20));
  const std::string garbage = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  // nghttp2 refuses the bytes at once or answers them with GOAWAY: either
  // way no stream is left hanging and none counts as answered.
  if (s.receive(garbage)) {
    std::string out;
    (void)s.produce(out, 1 << 20);
    EXPECT_NE(out.size(), 0u);  // the GOAWAY
  }
  ASSERT_TRUE(a.end && b.end);
  EXPECT_NE(a.end->why.find("HTTP/2"), std::string::npos) << a.end->why;
  EXPECT_TRUE(s.finished());
  EXPECT_FALSE(a.end->complete);
  EXPECT_FALSE(b.end->complete);
  EXPECT_TRUE(a.heads.empty());
  EXPECT_FALSE(s.can_open());
}

TEST(H2Session, FailAllEndsOpenStreamsOnceWithTheReason) {
  h2::Session s({});
  H2Peer peer;
  StreamLog a;
  a.open(s, get("/a"));
  peer.exchange(s);
  peer.head(1, 200, {});
  peer.body(1, "half", /*end=*/false);
  peer.exchange(s);
  s.fail_all("recv: Connection reset by peer");
  s.fail_all("again");
  ASSERT_TRUE(a.end.has_value());
  EXPECT_FALSE(a.end->complete);
  EXPECT_EQ(a.end->why, "recv: Connection reset by peer");
  EXPECT_EQ(s.error(), "recv: Connection reset by peer");
  EXPECT_TRUE(s.finished());
}

}  // namespace
}  // namespace abide
