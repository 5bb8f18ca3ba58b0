// Which permitted transfers LoopClient hands to libcurl now, and which wait
// for a connection being set up to an origin over TLS (private to
// abide::curl).
//
// libcurl (7.88 to 8.x) queues a transfer that finds no usable connection
// (the cap on an origin's connections reached, or a connection whose
// multiplexing is not known yet) and takes one queued transfer out per event
// (a transfer's end, a connection found to multiplex). A burst of streams to
// an HTTP/2 origin with a connection cap therefore waited in that queue, each
// for a whole stream to end; without a cap, each opened its own connection.
// The gate lets one transfer per origin at a time be "connecting" (handed to
// libcurl, its connection not ready yet); the next goes once that one's
// connection is ready, so it finds the connection and shares it when the
// origin multiplexes (a new connection when the others are full). Once an
// answer says HTTP/1.x, the origin is not gated (each transfer needs its own
// connection, and libcurl's queue serves that as connections free up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace abide::curl_detail {

class ConnectionGate {
 public:
  using Id = std::uint64_t;

  // Whether transfer `id` to `origin` may go to libcurl now (it is then the
  // origin's connecting one, unless the origin is not gated); false: it is
  // held, in arrival order, until released() names it.
  [[nodiscard]] bool admit(const std::string& origin, Id id);
  // The connecting transfer `id` of `origin` has its connection ready.
  void connected(const std::string& origin, Id id);
  // An answer to `origin` came over HTTP `version` (11, 20, ...): HTTP/1.x
  // ends the origin's gate.
  void heard(const std::string& origin, int version);
  // Transfer `id` of `origin` ended or left its hold (cancelled, timed out).
  // The connecting one that ends before its connection was ready releases
  // every held one (each then tries on its own: a server that is down is not
  // tried one transfer at a time).
  void left(const std::string& origin, Id id);

  // The transfers to hand to libcurl now, in order (each skips admit()).
  std::vector<Id> take_released();
  // Each origin's connecting transfer, to look at after libcurl ran.
  const std::unordered_map<std::string, Id>& connecting() const noexcept { return connecting_; }

 private:
  struct Origin {
    bool serial = false;  // an answer said HTTP/1.x: not gated
    std::deque<Id> held;
  };
  void release_next(const std::string& origin, Origin& o);
  void forget_if_idle(const std::string& origin);

  // Origins with a connecting transfer or held ones, and those known serial
  // (at most kMaxKnown; beyond it, a known origin is gated again until an
  // answer says HTTP/1.x).
  static constexpr std::size_t kMaxKnown = 4096;
  std::unordered_map<std::string, Origin> origins_;
  std::unordered_map<std::string, Id> connecting_;
  std::vector<Id> released_;
};

}  // namespace abide::curl_detail
