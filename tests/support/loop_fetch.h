// Test support: one request run to its outcome on an abide::LoopClient, for
// the tests of its own HTTP clients.
#pragma once

#include <abide/loop_client.h>

#include <string>
#include <utility>

namespace abide::test {

// Runs `r` on `client` until it ends.
inline RequestOutcome fetch(LoopClient& client, Request r) {
  RequestOutcome got;
  client.start(std::move(r), [&](RequestOutcome&& out) { got = std::move(out); });
  client.run();
  return got;
}

// A request of `method` to `url`.
inline Request get(const std::string& url, std::string method = "GET") {
  Request r;
  r.url = url;
  r.method = std::move(method);
  return r;
}

}  // namespace abide::test
