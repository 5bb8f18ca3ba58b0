// `abide fetch`: the requests of a run on one event loop (see fetch_batch.h).
#include "fetch/fetch_batch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <utility>
#include <vector>

#include "abide/headers.h"
#include "common.h"
#include "fetch/fetch_redirect.h"

namespace abide::cli {
namespace fetch_batch {  // private to this file (the CLI is compiled in batches)

// One request of the run while it is out: its job, the hop being made, and
// what its hops add up to.
struct Flight {
  std::size_t index = 0;
  FetchJob job;
  Request request;            // the hop being made
  HeaderList first_headers;   // the first hop's fields (a redirect to another origin drops credentials)
  BodyOutput::Body written;   // its output, over every hop
  MonoTime began{};
  std::int64_t followed = 0;  // redirects followed
  std::int64_t retries = 0;   // attempts beyond the first, over every hop
  RequestOutcome total;       // the hops so far
  // The hop's answer, as its head said: a redirect -L follows, and its own
  // permitted time (a done outcome no longer carries it; the head does).
  bool hop = false;
  std::optional<WallTime> hop_not_before;
};

// A descriptor readable once a stop is asked for (from the signal thread).
class StopSignal {
 public:
  explicit StopSignal(std::stop_token stop) : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    wake_.emplace(std::move(stop), [this] { ring(); });
  }
  ~StopSignal() {
    // The callback first: its destructor waits for a ring in progress on the
    // signal thread, which must not write to a closed (or reused) descriptor.
    wake_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;
  int fd() const noexcept { return fd_; }

 private:
  void ring() const {
    const std::uint64_t one = 1;
    if (fd_ >= 0) static_cast<void>(::write(fd_, &one, sizeof one));
  }
  int fd_;
  std::optional<std::stop_callback<std::function<void()>>> wake_;
};

class Batch {
 public:
  explicit Batch(BatchContext& c) : c_(c) {}

  void run(std::stop_token stop) {
    const StopSignal stop_signal(stop);
    take_more(stop);
    while (!flights_.empty() || c_.client.running() > 0) {
      if (stop.stop_requested() && !stopping_) cancel_all();
      wait(stop_signal.fd());
      c_.client.process();
      take_more(stop);
    }
    // Whatever the feed still holds was never sent: it ends cancelled.
    take_more(stop);
  }

 private:
  // Waits for the client's descriptor, its timeout, or a stop.
  void wait(int stop_fd) const {
    int ms = -1;
    if (const auto t = c_.client.timeout()) {
      ms = static_cast<int>(
          std::min<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(*t).count(), 60'000));
    }
    pollfd fds[2] = {{c_.client.fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    static_cast<void>(::poll(fds, stopping_ || stop_fd < 0 ? 1 : 2, ms));
  }

  void cancel_all() {
    stopping_ = true;
    for (const auto& [index, flight] : flights_) c_.client.cancel(ids_[index]);
  }

  // Starts requests until `jobs` are out; after a stop, ends the rest unsent.
  void take_more(const std::stop_token& stop) {
    while (flights_.size() < c_.jobs || stop.stop_requested()) {
      auto taken = c_.feed.next();
      if (!taken) return;
      auto f = std::make_unique<Flight>();
      f->index = taken->first;
      f->job = std::move(taken->second);
      f->began = system_monotonic_clock().now();
      f->request = c_.make_request(f->job);
      f->first_headers = f->request.headers;
      if (stop.stop_requested()) {
        RequestOutcome out;
        out.kind = OutcomeKind::kCancelled;
        out.reason = "cancelled before the first attempt";
        finish(*f, std::move(out));
        continue;
      }
      if (c_.options.verbose) {
        detail::MutexLock lock(c_.flight_mu);
        c_.in_flight[f->index] = &f->job;
      }
      Flight& flight = *f;
      flights_.emplace(flight.index, std::move(f));
      start_hop(flight);
    }
  }

  void start_hop(Flight& f) {
    f.hop = false;
    f.hop_not_before.reset();
    ResponseSink to_output;
    to_output.head = [this, &f](const FinalHead& head) {
      f.hop = c_.options.location && head.kind == OutcomeKind::kDone && is_followed_redirect(head.response.status) &&
              head.response.headers.first("Location").has_value();
      if (f.hop) f.hop_not_before = head.outcome.not_before_wall;
      return c_.sink.head(f.written, f.job, head, f.hop);
    };
    to_output.body = [this, &f](std::string_view chunk) { return c_.sink.chunk(f.written, chunk); };
    ids_[f.index] = c_.client.start(
        f.request, [this, &f](RequestOutcome&& out) { hop_done(f, std::move(out)); }, std::move(to_output), f.index);
  }

  // A hop ended: the next one with -L, else the request ends.
  void hop_done(Flight& f, RequestOutcome&& out) {
    if (!out.attempts.empty()) f.retries += static_cast<std::int64_t>(out.attempts.size()) - 1;
    // The request's record covers every hop: attempts and waits add up.
    f.total.attempts.insert(f.total.attempts.end(), std::make_move_iterator(out.attempts.begin()),
                            std::make_move_iterator(out.attempts.end()));
    f.total.waited += out.waited;
    out.attempts = std::move(f.total.attempts);
    out.waited = f.total.waited;
    f.total = std::move(out);
    if (f.hop && f.total.done() && f.total.response && !stopping_) {
      if (auto next = next_hop(f)) {
        f.request = std::move(*next);
        start_hop(f);
        return;
      }
    }
    ended(f);
  }

  // The request a followed redirect makes, or nullopt when it ends here (the
  // outcome then says why).
  std::optional<Request> next_hop(Flight& f) {
    const engine::Response& answer = *f.total.response;
    if (f.followed >= c_.options.max_redirs) {
      f.total.kind = OutcomeKind::kNotRetryable;
      f.total.reason = "Maximum (" + std::to_string(c_.options.max_redirs) + ") redirects followed";
      return std::nullopt;
    }
    auto target = resolve_location(f.request.url, answer.headers.first("Location").value_or(""));
    if (!target) {
      f.total.kind = OutcomeKind::kNotRetryable;
      f.total.reason = target.error().text;
      return std::nullopt;
    }
    ++f.followed;
    Request r = redirected_request(f.request, answer.status, *target, f.job.url, f.first_headers, f.hop_not_before);
    r.pacer_key = c_.pacer_key(r);
    return r;
  }

  void ended(Flight& f) {
    c_.ended_on_key(f.request.pacer_key);
    if (c_.options.verbose) {
      detail::MutexLock lock(c_.flight_mu);
      c_.in_flight.erase(f.index);
    }
    const std::size_t index = f.index;
    finish(f, std::move(f.total));
    ids_.erase(index);
    flights_.erase(index);  // f is gone
  }

  // The request's outcome, said in curl's terms, written out and recorded.
  void finish(Flight& f, RequestOutcome out) {
    bool http_failed = false;  // -f / --fail-with-body and an HTTP error
    if (f.written.too_large) {
      // Said in curl's terms, with the limit (the engine only knows the sink refused).
      out.kind = OutcomeKind::kNotRetryable;
      out.reason = "the body is larger than --max-filesize " + std::to_string(c_.options.max_filesize) + " bytes";
    } else if (f.written.http_failed) {
      http_failed = true;
      out.kind = OutcomeKind::kNotRetryable;
      out.reason = "The requested URL returned error: " + std::to_string(f.written.failed_status);
    }
    const std::string after = write_out_text(f, out);
    if (!c_.sink.end(f.written, after)) {
      c_.write_failed.store(true);
      // Said with the request, once: the body did not reach its destination.
      if (!f.written.error.empty()) {
        out.kind = OutcomeKind::kNotRetryable;
        out.reason = f.written.error;
        c_.said_failure.store(true);
      } else {
        c_.unsaid_failure.store(true);
      }
    }
    c_.summary.add(f.index, f.job, out, http_failed);
    c_.progress.on_done();
  }

  // -w's text for the request (its errors go to stderr at once).
  std::string write_out_text(const Flight& f, const RequestOutcome& out) const {
    if (!c_.write_out) return {};
    WriteOutValues v;
    v.http_code = out.response ? out.response->status : 0;
    v.http_version = out.response ? out.response->http_version : 0;
    v.url = f.job.url;
    v.url_effective = f.followed > 0 ? printable(f.request.url, 8192) : f.job.url;
    v.method = f.request.method;
    v.time_total = system_monotonic_clock().now() - f.began;
    v.num_retries = f.retries;
    v.num_redirects = f.followed;
    v.size_download = out.body_bytes;
    v.exitcode = out.done() ? 0 : 1;
    v.errormsg = out.done() ? std::string() : safe_text(out.reason);
    v.outcome = std::string(to_string(out.kind));
    v.waited = out.waited;
    v.attempts = static_cast<std::int64_t>(out.attempts.size());
    v.not_before = out.not_before_wall;
    v.headers = out.response ? &out.response->headers : nullptr;
    WriteOutText text = expand_write_out(*c_.write_out, v);
    if (!text.err.empty()) std::cerr << text.err << std::flush;
    return std::move(text.out);
  }

  BatchContext& c_;
  std::unordered_map<std::size_t, std::unique_ptr<Flight>> flights_;
  std::unordered_map<std::size_t, LoopClient::Id> ids_;
  bool stopping_ = false;
};

}  // namespace fetch_batch

void run_batch(BatchContext& context, std::stop_token stop) {
  fetch_batch::Batch batch(context);
  batch.run(std::move(stop));
}

}  // namespace abide::cli
