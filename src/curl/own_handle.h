// The engine over a caller's own configured easy handle (Client::perform; see
// abide/client.h). Private to abide::curl.
#pragma once

#include <curl/curl.h>

#include <cstddef>
#include <stop_token>
#include <string>

#include "abide/client.h"
#include "abide/engine.h"
#include "transfer.h"

namespace abide::curl_detail {

// Sends each attempt on the caller's handle: sets CURLOPT_URL and its own
// header and write callbacks, keeps every other option, and puts the caller's
// callbacks back when it goes. Each attempt runs in one of the Client's
// transfer slots (max_transfers).
class HandleTransport final : public engine::Transport {
 public:
  HandleTransport(CURL* easy, CURLM* multi, const HandleCallbacks& callbacks, std::size_t max_body_bytes,
                  std::size_t max_header_bytes, TransferSlots& slots, const MonotonicClock& mono,
                  const WallClock& wall);
  ~HandleTransport() override;
  HandleTransport(const HandleTransport&) = delete;
  HandleTransport& operator=(const HandleTransport&) = delete;

  void perform(const engine::Request& request, const engine::Step& step, engine::Machine& machine,
               std::stop_token stop) override;

  // Where the final answer's body goes: the caller's write callback, or
  // (without one) the buffer that take_body() hands out.
  engine::BodySink sink();
  std::string take_body() { return std::move(body_); }

 private:
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* self);
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* self);
  // Gives the machine the final head (once per attempt); false: no complete head.
  bool report_head();
  bool give_head();
  bool sent(CURLcode code) const;

  CURL* easy_;
  CURLM* multi_;
  HandleCallbacks callbacks_;
  std::size_t max_body_bytes_;
  std::size_t max_header_bytes_;
  TransferSlots& slots_;
  const MonotonicClock& mono_;
  const WallClock& wall_;
  std::string body_;     // the final answer's body, when the caller has no write callback
  std::string refusal_;  // set once the handle sent another method than the request states

  // The attempt in flight.
  engine::Machine* machine_ = nullptr;
  HeadReader head_{0};
  bool reported_ = false;    // the machine has the head
  bool wanted_ = false;      // ... and wants the body
  bool stopped_ = false;     // the body was refused (by its destination or its size)
  bool head_owed_ = false;   // the head goes to the header callback with the body (read first for a wait)
  std::size_t dropped_ = 0;  // bytes of a retried answer's body read and dropped
};

}  // namespace abide::curl_detail
