// event_loop [BASE_URL] [N]: N GETs at once on one thread, from a poll()
// loop of the program's own, with abide's rules (pacer, Retry-After, quota
// headers, backoff) over libcurl's multi interface.
//
// The loop watches one descriptor of the client's (fd()) next to its own (here
// standard input: a line typed cancels what is left) and wakes when timeout()
// says; process() does what is due. A program on epoll, libuv or asio uses
// LoopClient::Hooks instead, to watch libcurl's sockets itself.
//
//   abide mock-server --port 8080 --limit 5 --window 1 &
//   example_event_loop http://127.0.0.1:8080 20
#include <abide/loop_client.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
  const std::string base = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
  const int n = argc > 2 ? std::atoi(argv[2]) : 20;

  abide::LoopClient client;
  std::vector<abide::LoopClient::Id> ids;
  int done = 0;
  for (int i = 1; i <= n; ++i) {
    abide::Request request;
    request.url = base + "/items/" + std::to_string(i);
    ids.push_back(client.start(request, [&done, i](abide::RequestOutcome&& out) {
      const std::string_view kind = abide::to_string(out.kind);
      std::printf("/items/%d: %.*s, status %d, %zu attempts, waited %.2f s\n", i, static_cast<int>(kind.size()),
                  kind.data(), out.response ? out.response->status : 0, out.attempts.size(),
                  abide::to_seconds(out.waited));
      done += out.done() ? 1 : 0;
    }));
  }

  bool stdin_open = true;
  while (client.running() > 0) {
    // Ask timeout() again after every call into the client: a new request
    // or an answer changes it.
    int wait_ms = -1;
    if (const auto t = client.timeout())
      wait_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*t).count());
    pollfd fds[2] = {{client.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (::poll(fds, stdin_open ? 2 : 1, wait_ms) < 0) break;
    if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      char line[256];
      if (::read(STDIN_FILENO, line, sizeof line) > 0) {
        for (const auto id : ids) client.cancel(id);  // each ends cancelled, and is reported
      }
      stdin_open = false;
    }
    client.process();
  }
  std::printf("%d of %d requests done\n", done, n);
  return done == n ? 0 : 1;
}
