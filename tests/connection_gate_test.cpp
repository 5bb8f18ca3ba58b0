// The gate that lets one transfer per origin at a time wait for its
// connection (src/curl/connection_gate.h): who goes, who waits, and when
// the waiting ones go.
#include "curl/connection_gate.h"

#include <gtest/gtest.h>

#include <vector>

namespace abide::curl_detail {
namespace {

using Ids = std::vector<ConnectionGate::Id>;
const std::string kA = "https://a.example";
const std::string kB = "https://b.example";

TEST(ConnectionGate, OneTransferPerOriginConnectsTheOthersWaitInOrder) {
  ConnectionGate g;
  EXPECT_TRUE(g.admit(kA, 1));
  EXPECT_FALSE(g.admit(kA, 2));
  EXPECT_FALSE(g.admit(kA, 3));
  EXPECT_TRUE(g.admit(kB, 4));  // another origin has its own
  EXPECT_EQ(g.take_released(), Ids{});
  g.connected(kA, 1);  // the next goes, and is the connecting one now
  EXPECT_EQ(g.take_released(), Ids{2});
  EXPECT_FALSE(g.admit(kA, 5));
  g.connected(kA, 2);
  EXPECT_EQ(g.take_released(), Ids{3});
  g.connected(kA, 3);
  EXPECT_EQ(g.take_released(), Ids{5});
  g.connected(kA, 5);
  EXPECT_EQ(g.take_released(), Ids{});
  EXPECT_TRUE(g.admit(kA, 6));  // nothing connecting: at once
}

TEST(ConnectionGate, AConnectionThatFailsReleasesEveryWaitingTransfer) {
  ConnectionGate g;
  ASSERT_TRUE(g.admit(kA, 1));
  ASSERT_FALSE(g.admit(kA, 2));
  ASSERT_FALSE(g.admit(kA, 3));
  g.left(kA, 1);  // ended before its connection was ready
  EXPECT_EQ(g.take_released(), (Ids{2, 3}));
  EXPECT_TRUE(g.admit(kA, 4));
}

TEST(ConnectionGate, AnHttp1AnswerEndsTheGateOfItsOrigin) {
  ConnectionGate g;
  ASSERT_TRUE(g.admit(kA, 1));
  ASSERT_FALSE(g.admit(kA, 2));
  g.heard(kA, 20);  // HTTP/2: still gated
  EXPECT_FALSE(g.admit(kA, 3));
  g.heard(kA, 11);
  EXPECT_EQ(g.take_released(), (Ids{2, 3}));
  EXPECT_TRUE(g.admit(kA, 4));
  EXPECT_TRUE(g.admit(kA, 5));
  EXPECT_TRUE(g.connecting().empty());
}

TEST(ConnectionGate, AWaitingTransferThatLeavesIsNotReleased) {
  ConnectionGate g;
  ASSERT_TRUE(g.admit(kA, 1));
  ASSERT_FALSE(g.admit(kA, 2));
  ASSERT_FALSE(g.admit(kA, 3));
  g.left(kA, 2);  // cancelled while it waited
  g.connected(kA, 1);
  EXPECT_EQ(g.take_released(), Ids{3});
  // Only the connecting transfer's readiness counts.
  g.connected(kA, 1);
  EXPECT_EQ(g.take_released(), Ids{});
}

TEST(ConnectionGate, OriginsWithNothingInFlightAreForgotten) {
  ConnectionGate g;
  for (ConnectionGate::Id i = 1; i <= 10000; ++i) {
    const std::string origin = "https://h" + std::to_string(i) + ".example";
    ASSERT_TRUE(g.admit(origin, i));
    g.connected(origin, i);
  }
  EXPECT_TRUE(g.connecting().empty());
  EXPECT_TRUE(g.take_released().empty());
}

}  // namespace
}  // namespace abide::curl_detail
