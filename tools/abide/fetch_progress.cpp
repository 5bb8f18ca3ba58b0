#include "fetch_progress.h"

#include <algorithm>
#include <cstdio>

namespace abide::cli {

Progress::Progress(std::size_t total, const ProgressOptions& options)
    : total_(total), options_(options), enabled_(options.terminal && !options.silent && !options.verbose) {}

Progress::~Progress() { stop(); }

void Progress::start() {
  if (!enabled_ || thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      draw_locked();
      cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; });
    }
    erase_locked();
  });
}

void Progress::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::on_event(const ClientEvent& e) {
  using K = ClientEvent::Kind;
  switch (e.kind) {
    case K::kWaitStarted: waiting_.fetch_add(1); break;
    case K::kWaitEnded: waiting_.fetch_sub(1); break;
    case K::kAttemptStarted: in_flight_.fetch_add(1); break;
    case K::kResponseObserved:
    case K::kTransportError: in_flight_.fetch_sub(1); break;
    case K::kDecision:
    case K::kFinished: break;
  }
}

void Progress::on_done() { done_.fetch_add(1); }

std::string Progress::line() const {
  const std::size_t done = done_.load();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "[%zu/%zu] %ld in flight, %ld waiting", done, total_,
                        std::max(0L, in_flight_.load()), std::max(0L, waiting_.load()));
  if (done > 0 && done < total_ && n > 0) {
    const double eta = elapsed / static_cast<double>(done) * static_cast<double>(total_ - done);
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ", ETA %.0f s", eta);
  }
  return buf;
}

void Progress::print_line(const std::string& line) {
  std::lock_guard lock(mu_);
  erase_locked();
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
  if (enabled_ && !stopping_) draw_locked();
}

void Progress::draw_locked() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%s", line().c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::erase_locked() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace abide::cli
