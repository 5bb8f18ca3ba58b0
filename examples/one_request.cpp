// One request with a deadline: abide waits as long as the server asks (never
// less), and says so when the server's time is after the deadline.
//
//   example_one_request [URL]      (default: a local `abide mock-server --port 8080`)
#include <abide/client.h>
#include <abide/http_date.h>

#include <chrono>
#include <cstdio>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  abide::Client client;  // system clocks, an in-memory pacer, the default planner

  abide::Request request;
  request.url = argc > 1 ? argv[1] : "http://127.0.0.1:8080/items/1";
  request.deadline = abide::system_monotonic_clock().now() + 10s;

  const abide::RequestOutcome out = client.fetch(request);
  for (const abide::Attempt& a : out.attempts)
    std::printf("attempt %lld: %s\n", static_cast<long long>(a.number), a.reason.c_str());
  std::printf("outcome: %s\n", std::string(abide::to_string(out.kind)).c_str());
  if (out.done()) std::printf("%s", out.body.c_str());
  if (out.not_before_wall)  // deferred or deadline_exceeded: when the server permits another try
    std::printf("retry permitted from %s\n", abide::format_rfc3339(*out.not_before_wall).c_str());
  return out.done() ? 0 : 1;
}
