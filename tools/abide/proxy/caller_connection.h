// One caller connection of `abide proxy`, as a state machine its loop drives
// (proxy_worker.h): read a head, its body, forward it (a LoopClient request)
// or answer it, send the answer, repeat while the connection is kept alive.
//
//   kIdle     between requests: no buffer held, closed after idle_timeout
//   kHead     a head is arriving (head_timeout for all of it)
//   kBody     its body is arriving (head_timeout for each read)
//   kForward  a flight runs upstream; its answer streams into the output as
//             it comes (paused above a high-water mark); a hang-up cancels it
//   kFlush    the answer is made: what is left of it is sent, then kIdle (or
//             the connection closes)
//   kLinger   after an error answer: the caller's bytes are dropped for a
//             moment, so that closing does not reset the answer away
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "abide/client.h"
#include "proxy/answer_writer.h"
#include "proxy/http1_request.h"
#include "proxy/proxy_core.h"

namespace abide::proxy {

class Worker;

// One request's share of the memory every caller's bodies share
// (ProxyOptions::body_memory), given back by release() or at its end.
class BodyShare {
 public:
  BodyShare(std::atomic<std::uint64_t>& used, std::uint64_t limit) noexcept : used_(used), limit_(limit) {}
  ~BodyShare() { release(); }
  BodyShare(const BodyShare&) = delete;
  BodyShare& operator=(const BodyShare&) = delete;

  // Grows the share to `bytes` in all; false when the shared memory would pass its limit.
  bool cover(std::uint64_t bytes) noexcept;
  void release() noexcept {
    used_.fetch_sub(taken_);
    taken_ = 0;
  }

 private:
  std::atomic<std::uint64_t>& used_;
  std::uint64_t limit_;
  std::uint64_t taken_ = 0;
};

class Caller {
 public:
  Caller(Worker& worker, int fd);
  ~Caller();  // closes the socket
  Caller(const Caller&) = delete;
  Caller& operator=(const Caller&) = delete;

  int fd() const noexcept { return fd_; }
  // Between requests, with nothing read: may be closed for a new caller.
  bool idle() const noexcept { return state_ == State::kIdle && in_.empty() && pending() == 0; }
  bool has_output() const noexcept { return pending() != 0; }

  // Starts serving (watches for the first request).
  void begin();
  // epoll said `events` for the socket.
  void on_ready(std::uint32_t events);
  // The deadline set through Worker::set_deadline passed.
  void on_deadline();
  // After Worker::mark: sends what is pending, takes a flight's outcome, moves on.
  void service();
  // The drain began: an idle connection closes now; the others finish their request.
  void on_drain();

 private:
  friend class Worker;  // its deadline and epoll registration
  enum class State : std::uint8_t { kIdle, kHead, kBody, kForward, kFlush, kLinger };
  struct Forward;

  std::size_t pending() const noexcept { return out_.size() - sent_; }
  bool reading() const noexcept;  // a state that reads the caller's bytes
  void read_ready();
  void parse();  // what in_ holds, in the current state
  bool take_head();
  bool take_body();
  void handle();  // a whole request
  void answer(const MadeAnswer& a, bool head_request, bool keep_alive);
  void fail(int status, std::string_view reason);  // an error answer, then linger and close
  // An error answer to a request read whole (the connection stays as the
  // caller asked); `logged` for --verbose when it says more than `reason`.
  void refuse(int status, std::string_view reason, std::string_view logged = {});
  void log_caller(int status, std::string_view reason);
  void too_much_body();
  void own_page();
  void forward(const Route& route, Duration budget, std::vector<UnitCost> costs);
  MadeAnswer not_now(const Route& route, const Dialect& dialect, std::string_view reason);
  void finish_forward();
  void hang_up();
  void flush();
  void next_request();
  void linger();
  void end();
  void arm();
  std::optional<MonoTime> due() const;
  bool on_answer_head(const FinalHead& fh);
  bool on_answer_body(std::string_view chunk);

  Worker& w_;
  int fd_;
  State state_ = State::kIdle;
  bool gone_ = false;       // the caller hung up (or its socket failed)
  bool close_after_ = false;  // close once the output is sent
  bool linger_after_ = false;  // linger (not close) once the output is sent
  std::string in_;   // bytes read and not yet used
  std::string out_;  // bytes to send, from sent_ on
  std::size_t sent_ = 0;
  MonoTime progress_{};  // the last read (kHead/kBody), send (output pending) or state change
  MonoTime head_started_{};
  bool readable_ = false;     // bytes (or the end) may be waiting
  bool writable_ = true;      // the socket took the last send whole
  bool peer_closed_ = false;  // the caller closed its side (or the socket failed)
  bool sending_ = false;      // output was left pending (the send timeout runs)
  // The request being read.
  std::size_t searched_ = 0;
  std::optional<RequestHead> head_;
  BodyFraming framing_{};
  std::unique_ptr<ChunkedDecoder> chunked_;  // a chunked body's (a held caller holds none)
  std::string body_;
  BodyShare share_;
  bool keep_alive_ = false;
  std::unique_ptr<Forward> fwd_;
  std::size_t lingered_ = 0;
  MonoTime sent_at_{};  // the last send progress while output is pending
  // The loop's bookkeeping (Worker).
  std::optional<MonoTime> deadline_;  // as registered
  bool in_epoll_ = false;
  bool marked_ = false;
  bool closed_ = false;
};

}  // namespace abide::proxy
