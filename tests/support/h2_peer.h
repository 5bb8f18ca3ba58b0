// Test support: an HTTP/2 server's side of a connection in memory (nghttp2's
// server session), for the rules of the own HTTP/2 client's Session that a
// real server will not do on cue: GOAWAY, resets, informational heads,
// trailers, oversized heads, windows. Bytes move between the two only in
// exchange(), so each test says exactly what each side has seen.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "h2/session.h"

namespace abide::test {

class H2Peer {
 public:
  struct Request {
    std::map<std::string, std::string> fields;  // pseudo-fields too
    std::string body;
    bool ended = false;  // END_STREAM arrived
    std::uint32_t reset = 0xffffffff;  // the client's RST_STREAM code, if any
  };

  // `max_streams`: the SETTINGS_MAX_CONCURRENT_STREAMS this server sends.
  explicit H2Peer(std::uint32_t max_streams = 100) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data);
    nghttp2_session_server_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry entries[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries, 1);
  }
  ~H2Peer() { nghttp2_session_del(session_); }
  H2Peer(const H2Peer&) = delete;
  H2Peer& operator=(const H2Peer&) = delete;

  // Moves bytes both ways until neither side has more to say.
  void exchange(h2::Session& client) {
    for (int round = 0; round < 1000; ++round) {
      std::string up;
      if (!client.produce(up, std::size_t{1} << 20)) return;
      if (!up.empty())
        nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(up.data()), up.size());
      std::string down;
      const std::uint8_t* data = nullptr;
      for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;)
        down.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
      if (!down.empty() && !client.receive(down)) return;
      if (up.empty() && down.empty()) return;
    }
  }

  // A head (`status` and fields) on stream `id`; `end`: nothing follows.
  void head(std::int32_t id, int status, std::vector<std::pair<std::string, std::string>> fields, bool end = false) {
    fields.insert(fields.begin(), {":status", std::to_string(status)});
    const auto nva = to_nv(fields);
    nghttp2_submit_headers(session_, end ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE, id, nullptr, nva.data(),
                           nva.size(), nullptr);
  }
  // Body bytes on stream `id` (sent as its window allows); `end`: the answer ends with them.
  void body(std::int32_t id, std::string bytes, bool end = true) {
    Outgoing& out = outgoing_[id];
    out.bytes += bytes;
    out.end = end;
    nghttp2_data_provider provider;
    provider.source.ptr = &out;
    provider.read_callback = &read_out;
    nghttp2_submit_data(session_, end ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE, id, &provider);
  }
  // Trailer fields ending stream `id`.
  void trailers(std::int32_t id, std::vector<std::pair<std::string, std::string>> fields) {
    const auto nva = to_nv(fields);
    nghttp2_submit_trailer(session_, id, nva.data(), nva.size());
  }
  void reset(std::int32_t id, std::uint32_t code) { nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, code); }
  void goaway(std::int32_t last_id, std::uint32_t code = NGHTTP2_NO_ERROR) {
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, last_id, code, nullptr, 0);
  }

  std::map<std::int32_t, Request>& requests() { return requests_; }

 private:
  struct Outgoing {
    std::string bytes;
    std::size_t sent = 0;
    bool end = true;
  };
  static std::vector<nghttp2_nv> to_nv(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::vector<nghttp2_nv> nva;
    for (const auto& [n, v] : fields)
      nva.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                     reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    return nva;
  }
  static ssize_t read_out(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                          nghttp2_data_source* source, void*) {
    Outgoing& out = *static_cast<Outgoing*>(source->ptr);
    const std::size_t n = std::min(length, out.bytes.size() - out.sent);
    std::memcpy(buf, out.bytes.data() + out.sent, n);
    out.sent += n;
    if (out.sent == out.bytes.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!out.end) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return static_cast<ssize_t>(n);
  }
  static H2Peer& of(void* p) { return *static_cast<H2Peer*>(p); }
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* p) {
    of(p).requests_[frame->hd.stream_id].fields[std::string(reinterpret_cast<const char*>(name), namelen)] =
        std::string(reinterpret_cast<const char*>(value), valuelen);
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* p) {
    if (frame->hd.type == NGHTTP2_RST_STREAM) of(p).requests_[frame->hd.stream_id].reset = frame->rst_stream.error_code;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0)
      of(p).requests_[frame->hd.stream_id].ended = true;
    return 0;
  }
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                     void* p) {
    of(p).requests_[id].body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, Request> requests_;
  std::map<std::int32_t, Outgoing> outgoing_;
};

// What one stream's owner heard.
struct StreamLog : h2::StreamEvents {
  h2::Session* session = nullptr;
  std::int32_t id = 0;
  bool consume_at_once = true;
  std::vector<int> heads;
  std::vector<h2::Field> fields;  // of the last head
  std::string body;
  std::size_t unconsumed = 0;
  std::optional<h2::StreamEnd> end;

  void on_head(int status, std::span<const h2::Field> f) override {
    heads.push_back(status);
    fields.assign(f.begin(), f.end());
  }
  void on_data(std::string_view data) override {
    body += data;
    if (consume_at_once)
      session->consume(id, data.size());
    else
      unconsumed += data.size();
  }
  void on_end(const h2::StreamEnd& e) override { end = e; }

  // Opens this stream on `s`.
  std::int32_t open(h2::Session& s, const h2::RequestHead& head, std::string_view request_body = {}) {
    session = &s;
    id = s.open(head, request_body, *this);
    return id;
  }
  void consume_all() {
    session->consume(id, unconsumed);
    unconsumed = 0;
  }
  std::string field(std::string_view name) const {
    for (const auto& f : fields)
      if (f.name == name) return f.value;
    return "<none>";
  }
};

}  // namespace abide::test
