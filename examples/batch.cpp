// A concurrent batch against a quota: four workers share one pacer, which
// spreads the requests over the server's windows instead of running into 429s.
//
//   abide mock-server --port 8080 --limit 5 --window 1 &
//   example_batch [BASE_URL] [N]
#include <abide/client.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string base = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
  const int n = argc > 2 ? std::atoi(argv[2]) : 20;

  std::vector<abide::Request> batch(static_cast<std::size_t>(n > 0 ? n : 0));
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].url = base + "/items/" + std::to_string(i + 1);

  abide::Client client;
  abide::BatchOptions options;
  options.jobs = 4;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<abide::RequestOutcome> outcomes = client.fetch_all(batch, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::map<int, int> statuses;  // every status seen, retries included
  int done = 0;
  for (const abide::RequestOutcome& out : outcomes) {
    done += out.done() ? 1 : 0;
    for (const abide::Attempt& a : out.attempts) ++statuses[a.status];
  }
  std::printf("%d of %zu requests done in %.1f s\n", done, outcomes.size(), seconds);
  for (const auto& [status, count] : statuses) std::printf("  status %d: %d\n", status, count);
  return done == static_cast<int>(outcomes.size()) ? 0 : 1;
}
