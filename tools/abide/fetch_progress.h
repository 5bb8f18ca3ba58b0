// `abide fetch`'s progress line on a terminal: done/total, in flight, waiting,
// ETA. Fed by the client's event hook; redrawn a few times a second by its own
// thread; erased when it stops, and around every other line printed on stderr.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

#include "abide/client.h"

namespace abide::cli {

// Where fetch's stderr goes, and what the command line asked of it.
struct ProgressOptions {
  bool terminal = false;              // stderr is a terminal
  bool stdout_same_terminal = false;  // stdout is that same terminal (bodies are written there)
  bool silent = false;                // -s
  bool verbose = false;               // -v
};

class Progress {
 public:
  // Draws the line only on a terminal, and not with -s or -v.
  Progress(std::size_t total, const ProgressOptions& options);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts the drawing thread (no-op when disabled).
  void start();
  // Stops it and erases the line.
  void stop();

  // Counts what the client reports. Thread-safe.
  void on_event(const ClientEvent& e);
  void on_done();

  // Prints a whole line on stderr without tearing the progress line. Thread-safe.
  void print_line(const std::string& line);

  // The line as it would be drawn now (for tests).
  std::string line() const;

 private:
  void draw_locked();
  void erase_locked();

  const std::size_t total_;
  const ProgressOptions options_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<std::size_t> done_{0};
  std::atomic<long> in_flight_{0};
  std::atomic<long> waiting_{0};
  mutable std::mutex mu_;  // stderr and the drawn state
  std::condition_variable cv_;
  bool stopping_ = false;
  bool drawn_ = false;
  std::thread thread_;
};

}  // namespace abide::cli
