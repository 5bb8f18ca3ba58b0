#include "h2/session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ascii.h"

namespace abide::h2 {

struct Session::Stream {
  StreamEvents* events;     // null once cancelled: nothing more is told
  std::string_view body;    // the request's body, sent as the server's window allows
  std::size_t body_sent = 0;
  int status = 0;           // of the head being read
  std::vector<Field> fields;  // ... and its fields
  std::size_t head_bytes = 0;
  bool final_head = false;  // a head >= 200 was told
  bool heard = false;       // any frame of an answer arrived
  bool complete = false;    // END_STREAM arrived
  bool sent = false;        // the request's HEADERS went out
  bool overflow = false;    // the head passed max_head_bytes
  std::string failed;       // why this side reset the stream
};

namespace {

// A limit on what a server may make a head grow to: each field is counted as
// its HTTP/1.1 line would be ("name: value\r\n").
constexpr std::size_t kFieldOverhead = 4;
// The connection's window: data is passed on as it arrives (each stream's own
// window bounds what waits), so the connection needs no tight bound.
constexpr std::int32_t kConnectionWindow = 1 << 24;

bool forbidden_field(std::string_view name) {
  return ascii::iequals(name, "connection") || ascii::iequals(name, "keep-alive") ||
         ascii::iequals(name, "proxy-connection") || ascii::iequals(name, "transfer-encoding") ||
         ascii::iequals(name, "upgrade") || ascii::iequals(name, "host");
}

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  nghttp2_nv nv;
  nv.name = reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data()));
  nv.namelen = name.size();
  nv.value = reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data()));
  nv.valuelen = value.size();
  nv.flags = NGHTTP2_NV_FLAG_NONE;
  return nv;
}

std::string code_name(std::uint32_t code) { return nghttp2_http2_strerror(code); }

std::string lowercase(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = ascii::to_lower(c);
  return out;
}

}  // namespace

// nghttp2's callbacks, each given the Session as user_data.
struct Session::Callbacks {
  static Session& of(void* user_data) { return *static_cast<Session*>(user_data); }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (Stream* s = of(user_data).find(frame->hd.stream_id)) {
      s->heard = true;
      s->status = 0;
      s->fields.clear();
    }
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user_data) {
    Session& self = of(user_data);
    Stream* s = self.find(frame->hd.stream_id);
    if (s == nullptr || s->events == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    s->head_bytes += namelen + valuelen + kFieldOverhead;
    if (s->head_bytes > self.settings_.max_head_bytes) {
      s->overflow = true;
      s->failed = "the answer's head passed " + std::to_string(self.settings_.max_head_bytes) + " bytes";
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream alone
    }
    if (s->final_head) return 0;  // trailers: not passed on
    if (n == ":status") {
      // nghttp2 has checked it is three digits.
      s->status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
    } else if (!n.starts_with(':')) {
      s->fields.push_back({std::string(n), std::string(v)});
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Session& self = of(user_data);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      // Streams above its last id are ended by nghttp2 as refused.
      self.going_away_ = true;
      return 0;
    }
    Stream* s = self.find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !s->final_head && s->status != 0) {
      const int status = s->status;
      if (status >= 200) s->final_head = true;
      if (s->events != nullptr) s->events->on_head(status, s->fields);
      s->fields.clear();
      if (s->final_head) s->fields.shrink_to_fit();
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0)
      s->complete = s->final_head;
    return 0;
  }

  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* s = of(user_data).find(frame->hd.stream_id);
    if (s == nullptr || s->sent) return 0;
    s->sent = true;
    if (s->events != nullptr) s->events->on_sent();
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                           std::size_t len, void* user_data) {
    // The connection's window reopens at once; the stream's when its owner is done.
    nghttp2_session_consume_connection(session, len);
    Stream* s = of(user_data).find(id);
    if (s == nullptr || s->events == nullptr) return 0;
    s->events->on_data(std::string_view(reinterpret_cast<const char*>(data), len));
    return 0;
  }

  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user_data) {
    Session& self = of(user_data);
    Stream* s = self.find(id);
    if (s == nullptr) return 0;
    StreamEnd end;
    end.code = code;
    end.complete = s->complete;
    end.sent = s->sent && !(code == NGHTTP2_REFUSED_STREAM && !s->heard);
    if (s->overflow) {
      end.head_overflow = true;
      end.status = s->status;
      end.fields = std::move(s->fields);
    }
    if (!end.complete) {
      end.refused = code == NGHTTP2_REFUSED_STREAM && !s->heard;
      if (!s->failed.empty())
        end.why = s->failed;
      else if (end.refused)
        end.why = "the server refused the stream before processing it";
      else if (code != NGHTTP2_NO_ERROR)
        end.why = "the server reset the stream (" + code_name(code) + ")";
      else
        end.why = "the stream ended before the answer did";
    }
    self.end_stream(id, std::move(end));
    return 0;
  }

  // Why nghttp2 ends the connection (a frame it cannot take, a server that
  // does not speak HTTP/2): kept for the streams it ends.
  static int on_error(nghttp2_session*, int, const char* msg, std::size_t len, void* user_data) {
    Session& self = of(user_data);
    if (self.protocol_error_.empty()) self.protocol_error_.assign(msg, std::min<std::size_t>(len, 200));
    return 0;
  }

  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*) {
    Stream& s = *static_cast<Stream*>(source->ptr);
    if (s.events == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // cancelled: its body may be gone
    const std::size_t n = std::min(length, s.body.size() - s.body_sent);
    if (n > 0) std::memcpy(buf, s.body.data() + s.body_sent, n);
    s.body_sent += n;
    if (s.body_sent == s.body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

Session::Session(const Settings& settings) : settings_(settings) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_option* opt = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) {
    error_ = "out of memory";
    return;
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_error_callback2(cb, &Callbacks::on_error);
  if (nghttp2_option_new(&opt) == 0) {
    // Windows reopen as data is consumed (consume()), not as it arrives.
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (nghttp2_session_client_new2(&session_, cb, this, opt) != 0) session_ = nullptr;
    nghttp2_option_del(opt);
  }
  nghttp2_session_callbacks_del(cb);
  if (session_ == nullptr) {
    error_ = "out of memory";
    return;
  }
  const nghttp2_settings_entry entries[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, std::min<std::uint32_t>(settings_.stream_window, (1u << 31) - 1)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(std::min<std::size_t>(settings_.max_head_bytes, std::numeric_limits<std::uint32_t>::max()))},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries, std::size(entries)) != 0 ||
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) != 0) {
    nghttp2_session_del(session_);
    session_ = nullptr;
    error_ = "out of memory";
  }
}

Session::~Session() {
  // No event reaches an owner from here on: a session destroyed with streams
  // open is its owner's decision (fail_all tells them first, when wanted).
  for (auto& [id, s] : streams_) s->events = nullptr;
  nghttp2_session_del(session_);
}

Session::Stream* Session::find(std::int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

void Session::end_stream(std::int32_t id, StreamEnd end) {
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const std::unique_ptr<Stream> s = std::move(it->second);
  streams_.erase(it);
  if (s->events != nullptr) s->events->on_end(end);
}

std::int32_t Session::open(const RequestHead& head, std::string_view body, StreamEvents& events) {
  if (session_ == nullptr || broken_ || going_away_) {
    error_ = broken_ ? error_ : "the connection is going away";
    return 0;
  }
  std::vector<nghttp2_nv> nva;
  nva.reserve(4 + head.fields.size());
  nva.push_back(make_nv(":method", head.method));
  nva.push_back(make_nv(":scheme", head.scheme));
  nva.push_back(make_nv(":authority", head.authority));
  nva.push_back(make_nv(":path", head.path));
  // Field names go lowercase (RFC 9113, 8.2.1); nghttp2 copies them on submit.
  std::vector<std::string> lowered;
  lowered.reserve(head.fields.size());
  for (const Field& f : head.fields) {
    if (forbidden_field(f.name)) continue;
    if (ascii::iequals(f.name, "te") && !ascii::iequals(f.value, "trailers")) continue;
    lowered.push_back(lowercase(f.name));
    nva.push_back(make_nv(lowered.back(), f.value));
  }
  auto stream = std::make_unique<Stream>();
  stream->events = &events;
  stream->body = body;
  nghttp2_data_provider provider;
  provider.source.ptr = stream.get();
  provider.read_callback = &Callbacks::read_body;
  const std::int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                                 body.empty() ? nullptr : &provider, nullptr);
  if (id < 0) {
    error_ = std::string("cannot open a stream: ") + nghttp2_strerror(id);
    return 0;
  }
  streams_.emplace(id, std::move(stream));
  return id;
}

void Session::cancel(std::int32_t id) {
  Stream* s = find(id);
  if (s == nullptr || s->events == nullptr) return;
  s->events = nullptr;  // kept until nghttp2 closes it: its body callback may still be asked
  if (nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL) != 0) end_stream(id, {});
}

void Session::consume(std::int32_t id, std::size_t bytes) {
  if (session_ != nullptr && !broken_ && find(id) != nullptr) nghttp2_session_consume_stream(session_, id, bytes);
}

bool Session::receive(std::span<const char> bytes) {
  if (broken_) return false;
  const ssize_t n = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                             bytes.size());
  if (n < 0) {
    fail_all(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    return false;
  }
  end_if_over();
  return !broken_;
}

void Session::end_if_over() {
  // nghttp2 ended the connection itself (it sent GOAWAY for a protocol
  // error, and wants nothing more): the streams it left open never end otherwise.
  if (nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0) return;
  if (streams_.empty() && !protocol_error_.empty()) going_away_ = true;
  if (streams_.empty()) return;
  fail_all("HTTP/2: " + (protocol_error_.empty() ? std::string("the connection ended") : protocol_error_));
}

bool Session::produce(std::string& out, std::size_t up_to) {
  if (broken_) return false;
  while (out.size() < up_to) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      fail_all(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
      return false;
    }
    if (n == 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  end_if_over();
  return true;
}

void Session::fail_all(std::string_view why) {
  if (!broken_) error_ = std::string(why);
  broken_ = true;
  going_away_ = true;
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, s] : streams) {
    if (s->events == nullptr) continue;
    StreamEnd end;
    end.complete = s->complete;
    end.sent = s->sent;
    end.code = NGHTTP2_INTERNAL_ERROR;
    if (!end.complete) end.why = std::string(why);
    s->events->on_end(end);
  }
}

bool Session::can_open() const noexcept {
  if (session_ == nullptr || broken_ || going_away_) return false;
  const std::uint32_t server = nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return streams_.size() < std::min(server, settings_.max_streams) &&
         nghttp2_session_get_next_stream_id(session_) < (1u << 31) - 1;
}

bool Session::finished() const noexcept {
  return session_ == nullptr || ((broken_ || going_away_) && streams_.empty()) ||
         (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0);
}

bool Session::wants_write() const noexcept {
  return session_ != nullptr && !broken_ && nghttp2_session_want_write(session_) != 0;
}

}  // namespace abide::h2
