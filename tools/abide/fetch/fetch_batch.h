// `abide fetch`: the requests of a run on one event loop (abide::LoopClient).
// At most `jobs` requests are out at once; each is taken from the feed when
// one ends, so a run of any length holds only those. With -L a request is
// one engine request per hop, each paced, retried and waited for like any.
// Everything runs on the calling thread; a stop (SIGINT, SIGTERM) cancels
// what is out, and the requests not yet taken end cancelled unsent.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>

#include "abide/loop_client.h"
#include "fetch/body_output.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_options.h"
#include "fetch/fetch_progress.h"
#include "fetch/fetch_request.h"
#include "fetch/fetch_write_out.h"
#include "mutex.h"

namespace abide::cli {

// What the run gives its batch: where requests come from and go to.
struct BatchContext {
  const FetchOptions& options;
  JobFeed& feed;
  BodyOutput& sink;
  Progress& progress;
  RunSummary& summary;
  const std::optional<WriteOutFormat>& write_out;
  LoopClient& client;
  std::size_t jobs = 1;  // requests out at once
  // The request a job describes, and the pacer key of a redirected one.
  std::function<Request(const FetchJob&)> make_request;
  std::function<std::string(const Request&)> pacer_key;
  // Called when a request ended, with its pacer key (what it learned is said).
  std::function<void(const std::string&)> ended_on_key;
  // -v: the requests out, by their index (the events' index).
  detail::Mutex& flight_mu;
  std::unordered_map<std::size_t, const FetchJob*>& in_flight ABIDE_GUARDED_BY(flight_mu);
  // Outputs that failed: one a request's message says, or one none does.
  std::atomic<bool>& write_failed;
  std::atomic<bool>& said_failure;
  std::atomic<bool>& unsaid_failure;
};

// Runs every request of the feed to its outcome; returns when all are
// recorded in the summary.
void run_batch(BatchContext& context, std::stop_token stop);

}  // namespace abide::cli
