// One HTTP/2 client connection's protocol state (nghttp2), without the
// socket: bytes from the server go in through receive(), bytes for it come
// out of produce(), and each request is a stream whose owner hears its
// answer through StreamEvents. Channel (channel.h) moves the bytes.
//
// Backpressure is per stream: a stream's data counts against its window
// until its owner calls consume(), so a stream whose reader is slow stops
// the server sending on it (at most `stream_window` bytes in flight) and
// never the connection's other streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct nghttp2_session;

namespace abide::h2 {

struct Field {
  std::string name;
  std::string value;
};

// How a stream ended.
struct StreamEnd {
  bool complete = false;  // the whole answer arrived (END_STREAM)
  // The server refused the stream before processing it (REFUSED_STREAM, or a
  // GOAWAY naming a lower last stream): the request was not applied, and may
  // be sent again whatever its method (RFC 9113, 8.7).
  bool refused = false;
  // The request's head went out (it may have been acted on): false when the
  // connection failed before it was written, or the stream was refused.
  bool sent = false;
  std::uint32_t code = 0;  // the HTTP/2 error code (0: NO_ERROR)
  std::string why;         // when not complete
  // The answer's head passed Settings::max_head_bytes: its status and the
  // fields read before the limit (a Retry-After among them still counts).
  bool head_overflow = false;
  int status = 0;
  std::vector<Field> fields;
};

// What a stream's owner hears. Calls come from within Session::receive,
// produce() or fail_all(); none may call back into the session but
// consume() and cancel().
class StreamEvents {
 public:
  virtual ~StreamEvents() = default;
  // A head: an informational one (1xx) or the final one. Field names are
  // lowercase (HTTP/2 sends them so); pseudo-fields are left out.
  virtual void on_head(int status, std::span<const Field> fields) = 0;
  // Body bytes, valid during the call; they count against the stream's
  // window until consume(id, data.size()).
  virtual void on_data(std::string_view data) = 0;
  // The last call for this stream.
  virtual void on_end(const StreamEnd& end) = 0;
  // The request's head went out.
  virtual void on_sent() {}
};

struct RequestHead {
  std::string_view method;
  std::string_view scheme;     // "https"
  std::string_view authority;  // host[:port]
  std::string_view path;       // origin-form
  // The request's fields, any case; those HTTP/2 forbids (Connection,
  // Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, Host: it is
  // :authority) are left out, and TE is kept only as "trailers".
  std::span<const Field> fields;
};

class Session {
 public:
  struct Settings {
    std::uint32_t stream_window = 64 * 1024;  // bytes a stream may have unconsumed
    std::size_t max_head_bytes = 256 * 1024;  // a head's fields beyond this reset the stream
    std::uint32_t max_streams = 100;          // at most this many at once, whatever the server allows
  };

  explicit Session(const Settings& settings);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // False when the session could not be made (out of memory): error().
  bool ok() const noexcept { return session_ != nullptr; }

  // Opens a stream for `head` with `body` (both must stay valid until
  // on_end); its answer goes to `events`. The stream id (> 0), or 0 and
  // error() says why (the connection is going away, or out of ids).
  [[nodiscard]] std::int32_t open(const RequestHead& head, std::string_view body, StreamEvents& events);
  // Stops a stream (RST_STREAM CANCEL): no further call reaches its events.
  void cancel(std::int32_t id);
  // The owner is done with `bytes` of a stream's data: the server may send as many again.
  void consume(std::int32_t id, std::size_t bytes);

  // Bytes the server sent. false: the connection is broken (error()), and
  // every stream has ended.
  [[nodiscard]] bool receive(std::span<const char> bytes);
  // Appends what is ready to send to `out` while it holds less than
  // `up_to` bytes. false: the connection is broken (error()).
  [[nodiscard]] bool produce(std::string& out, std::size_t up_to);
  // The connection ended (closed, failed): every open stream ends with `why`.
  void fail_all(std::string_view why);

  // Another stream may be opened now: the server's limit and ours leave room,
  // and no GOAWAY came.
  bool can_open() const noexcept;
  // No more streams may be opened (a GOAWAY came, or the connection failed).
  bool going_away() const noexcept { return going_away_ || broken_; }
  // Nothing more will happen: no stream open, and no more may be (GOAWAY, error).
  bool finished() const noexcept;
  // Something waits to be sent (produce() would give bytes).
  bool wants_write() const noexcept;
  std::size_t open_streams() const noexcept { return streams_.size(); }
  const std::string& error() const noexcept { return error_; }

 private:
  struct Stream;
  struct Callbacks;
  Stream* find(std::int32_t id) const;
  void end_stream(std::int32_t id, StreamEnd end);
  void end_if_over();

  Settings settings_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<std::int32_t, std::unique_ptr<Stream>> streams_;
  bool going_away_ = false;  // a GOAWAY came, or the connection failed
  bool broken_ = false;
  std::string error_;
  std::string protocol_error_;  // nghttp2's reason for ending the connection
};

}  // namespace abide::h2
