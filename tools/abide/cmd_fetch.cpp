// abide fetch: a curl-like client that obeys the server (abide::Client), for
// one URL or a batch: the run itself. Its flags are in fetch_flags.cpp, its
// requests are made by fetch_request.h, its bodies written by body_output.h.
// Built only with abide::curl (see CMakeLists.txt).

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abide/client.h"
#include "abide/headers.h"
#include "abide/profiles.h"
#include "body_output.h"
#include "command.h"
#include "common.h"
#include "fetch_jobs.h"
#include "fetch_options.h"
#include "fetch_progress.h"
#include "fetch_request.h"
#include "fetch_store.h"
#include "fetch_verbose.h"
#include "shown_url.h"

namespace abide::cli {
namespace cmd_fetch {  // private to this file (the CLI is compiled in unity batches)

using namespace std::chrono_literals;

// Takes SIGINT and SIGTERM on a thread of its own (they are blocked in every
// other thread): the first cancels the run, a second exits at once.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    // An inherited "ignore" would discard the signal before sigtimedwait.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { watch(); });
  }
  ~SignalWatcher() {
    finished_.store(true);
    thread_.join();
    pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
  }
  std::stop_token token() const { return source_.get_token(); }
  int signal_number() const { return signo_.load(); }

 private:
  void watch() {
    while (!finished_.load()) {
      timespec ts{0, 100'000'000};
      const int s = sigtimedwait(&set_, nullptr, &ts);
      if (s <= 0) continue;
      if (signo_.load() != 0) {
        static constexpr char kMsg[] = "\nabide: interrupted again; exiting without writing the resume file\n";
        static_cast<void>(::write(2, kMsg, sizeof kMsg - 1));
        std::_Exit(s == SIGTERM ? 143 : 130);
      }
      signo_.store(s);
      source_.request_stop();
    }
  }
  sigset_t set_{};
  std::stop_source source_;
  std::atomic<bool> finished_{false};
  std::atomic<int> signo_{0};
  std::thread thread_;
};

}  // namespace cmd_fetch

int run_fetch(const FetchOptions& o) {
  // --- the requests -------------------------------------------------------
  if (!o.output.empty() && !o.output_dir.empty()) {
    std::cerr << "abide fetch: -o and --output-dir cannot be combined\n";
    return kExitUsage;
  }
  auto spec = parse_store_spec(o.store);
  if (!spec) {
    std::cerr << "abide fetch: " << spec.error() << "\n";
    return kExitUsage;
  }
  spec->fallback = o.store_fallback;
  spec->fail_closed = o.fail_closed;
  auto profiles = load_profiles(o.profile_files);
  if (!profiles) {
    const RejectedProfileFile& r = profiles.error();
    return reject("--profile-file " + r.file + ": profile rejected: " + r.error.what());
  }
  ProfileRegistry& registry = *profiles;
  if (!o.profile.empty() && o.profile != "none" && registry.find(o.profile) == nullptr) {
    std::cerr << "abide fetch: unknown --profile \"" << o.profile << "\"\n";
    return kExitUsage;
  }
  auto plan = plan_requests(o);
  if (!plan) {
    std::cerr << "abide fetch: " << plan.error().message << "\n";
    return plan.error().exit_code;
  }
  const HeaderList& headers = plan->headers;
  std::vector<FetchJob>& jobs = plan->jobs;
  const bool batch = plan->batch;

  for (FetchJob& job : jobs) job.shown_url = shown_url(job.url);

  BodyOutput sink;
  if (auto err = sink.open(o, jobs.size())) return reject(*err);
  auto store = open_store(*spec);
  if (!store) return reject(store.error());

  // --- the client -----------------------------------------------------------
  // Signals first: every thread started from here on inherits the mask.
  cmd_fetch::SignalWatcher signals;
  ProgressOptions progress_options;
  progress_options.terminal = isatty(STDERR_FILENO) == 1;
  progress_options.stdout_same_terminal = progress_options.terminal && isatty(STDOUT_FILENO) == 1 &&
                                          o.output.empty() && o.output_dir.empty();
  progress_options.silent = o.silent;
  progress_options.verbose = o.verbose;
  Progress progress(jobs.size(), progress_options);

  ClientConfig config;
  config.max_attempts = o.max_attempts;
  config.profile = o.profile;
  config.registry = &registry;
  config.connect_timeout = seconds_option(o.connect_timeout_s);
  config.attempt_timeout = seconds_option(o.max_time_s);
  PacerConfig pacer_config;
  pacer_config.rules.pacing = o.pacing == "burst" ? Pacing::kBurst : Pacing::kSmooth;
  if (o.has_max_wait) {
    config.planner.max_wait = seconds_option(o.max_wait_s);
    pacer_config.max_wait = config.planner.max_wait;
  }
  if (o.has_seed) {
    config.random = std::make_shared<SeededRandom>(o.seed);
    pacer_config.seed = o.seed;
  }
  config.pacer = std::make_shared<Pacer>(pacer_config, std::move(*store));
  std::vector<Request> requests(jobs.size());
  // Client::fetch(request, sink) reports every request as index 0: the
  // request's place in `requests` says which it is.
  config.on_event = [&](const ClientEvent& event) {
    ClientEvent e = event;
    if (e.request != nullptr && e.request >= requests.data() && e.request < requests.data() + requests.size())
      e.index = static_cast<std::size_t>(e.request - requests.data());
    if (e.index >= jobs.size()) return;
    progress.on_event(e);
    if (o.verbose) verbose_event(progress, jobs, e);
  };
  Client client(config);

  const WallTime start_wall = system_wall_clock().now();
  const MonoTime start = system_monotonic_clock().now();
  // A resumed run: what the server permitted holds for the whole origin, so the
  // pacer starts with that cooldown (a fresh process knows nothing else).
  std::map<std::string, WallTime> cooldowns;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Request& r = requests[i];
    r.method = jobs[i].method;
    r.url = jobs[i].url;
    r.headers = headers;
    r.pacer_key = request_pacer_key(r.url, headers, o.pacer_key);
    if (jobs[i].not_before && !r.pacer_key.empty()) {
      auto [it, fresh] = cooldowns.emplace(r.pacer_key, *jobs[i].not_before);
      if (!fresh && *jobs[i].not_before > it->second) it->second = *jobs[i].not_before;
    }
    r.body = jobs[i].body;
    r.idempotency_key = jobs[i].idempotency_key;
    r.not_before = jobs[i].not_before;
    if (o.has_deadline) r.deadline = saturating_add(start, seconds_option(o.deadline_s));
  }
  for (const auto& [key, until] : cooldowns) {
    if (until > start_wall) client.pacer().block_until(key, until);
  }

  std::atomic<bool> write_failed{false};
  std::vector<RequestOutcome> outcomes(requests.size());
  std::atomic<std::size_t> next{0};
  // Workers share the client (its pacer and connections); each streams the
  // final answer of its request to the output as it arrives.
  const auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
      BodyOutput::Body written;
      ResponseSink to_output;
      to_output.head = [&](const FinalHead& head) { return sink.begin(written, jobs[i], head); };
      to_output.body = [&](std::string_view chunk) { return sink.chunk(written, chunk); };
      RequestOutcome out = client.fetch(requests[i], to_output, signals.token());
      if (!sink.end(written)) write_failed.store(true);
      if (written.too_large) {
        // Said in curl's terms, with the limit (the engine only knows the sink refused).
        out.kind = OutcomeKind::kNotRetryable;
        out.reason = "the body is larger than --max-filesize " + std::to_string(o.max_filesize) + " bytes";
      }
      outcomes[i] = std::move(out);
      progress.on_done();
    }
  };
  progress.start();
  {
    const std::size_t workers = std::clamp<std::size_t>(o.jobs, 1, std::max<std::size_t>(1, requests.size()));
    std::vector<std::thread> threads;
    threads.reserve(workers - 1);
    for (std::size_t w = 1; w < workers; ++w) threads.emplace_back(worker);
    worker();  // this thread is one of them
    for (auto& t : threads) t.join();
  }
  progress.stop();
  const Duration elapsed = system_monotonic_clock().now() - start;
  if (!sink.close()) write_failed.store(true);
  const int signo = signals.signal_number();

  // --- records ---------------------------------------------------------------
  std::size_t done = 0, resumable_left = 0, unfinished = 0;
  for (const auto& out : outcomes) {
    if (out.done()) ++done;
    else ++unfinished;
    if (resumable(out)) ++resumable_left;
  }
  int status = done == outcomes.size() ? kExitOk : kExitRejected;
  if (write_failed.load()) {
    std::cerr << "abide fetch: could not write every body\n";
    status = kExitRejected;
  }
  if (!o.stats.empty()) {
    const auto j = stats_json(jobs, outcomes, elapsed, signo != 0);
    if (auto err = write_file_atomically(o.stats,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                                             "\n")) {
      std::cerr << "abide fetch: " << *err << "\n";
      status = kExitRejected;
    }
  }
  if (resumable_left > 0) {
    const auto j = resume_json(jobs, outcomes, system_wall_clock().now());
    // Owner only: the resume file keeps URLs and bodies as given (to send them again).
    if (auto err = write_file_atomically(o.resume_file,
                                         j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                                         FileAccess::kOwnerOnly)) {
      std::cerr << "abide fetch: " << *err << "\n";
      status = kExitRejected;
    } else if (!o.silent || signo != 0) {
      std::cerr << "abide fetch: " << resumable_left << " unfinished request" << (resumable_left == 1 ? "" : "s")
                << " written to " << o.resume_file << " (run again with: abide fetch --resume " << o.resume_file
                << ")\n";
    }
  } else if (!o.resume.empty() && o.resume == o.resume_file) {
    std::filesystem::remove(o.resume_file);  // nothing left to resume
  }
  if (!o.silent) {
    std::size_t shown = 0;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      const auto& out = outcomes[i];
      // Cancelled requests are summed up by the resume message, unless they need reconciling.
      if (out.done() || (out.kind == OutcomeKind::kCancelled && !out.ambiguous)) continue;
      if (++shown > 20) continue;
      std::cerr << "abide fetch: " << jobs[i].method << " " << jobs[i].shown_url << ": " << to_string(out.kind)
                << (out.ambiguous ? " (ambiguous: may have been applied)" : "") << ": " << safe_text(out.reason)
                << "\n";
    }
    if (shown > 20) std::cerr << "abide fetch: ... and " << shown - 20 << " more\n";
    if (batch || o.verbose) {
      std::cerr << "abide fetch: " << outcomes.size() << " requests, " << done << " done, " << unfinished
                << " not done; elapsed " << fmt_seconds(elapsed) << "\n";
    }
  }
  if (signo != 0) return signo == SIGTERM ? 143 : 130;
  return status;
}


}  // namespace abide::cli
