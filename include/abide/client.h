// abide/client.h: HTTP requests that obey the server, over libcurl (target
// abide::curl). This header includes no curl header. A Client is the engine
// of abide/engine.h over libcurl: the rules live there, for any transport.
//
// A Client sends each request through the pacer (abide/pacer.h), reads the
// response into Signals (abide/signals.h), asks the planner (abide/planner.h)
// what to do, waits when told to (cancellably, on the monotonic clock), and
// repeats until the request has a final outcome:
//
//   done               a final response (2xx, or 1xx/3xx)
//   deferred           permitted again only after the longest acceptable wait
//   deadline_exceeded  permitted again only after the request's deadline
//   not_retryable      must not be repeated automatically (status, method, the
//                      server's own "do not retry"; or ambiguous: a
//                      non-idempotent request may have been applied)
//   exhausted          no attempts (or retry budget) left
//   cancelled          the stop token was triggered
//
// An attempt that fails in a way no retry can change ends the request at once,
// not_retryable, with nothing sent: a scheme or URL libcurl will not take, a
// feature it was built without, an option it refuses, a proxy URL it cannot
// read, a certificate that is not accepted (the server's, or the client's),
// and a TLS handshake the server answered by refusing the version or cipher.
// Transient failures are retried as the planner says: a refused or reset
// connection, a timeout, a handshake cut short, and a failed name lookup (a
// resolver's hiccup looks like a mistyped host, and costs only the
// attempts' backoff).
//
// Every request ends with exactly one outcome, which carries every attempt and
// the decision taken after it. A batch runs on a pool of workers, each with its
// own connection (reused from request to request), all sharing one pacer. Each
// origin's server clock is learned from the Dates it sends (ServerClock, given
// each request's send time), so date-form hints need not cost up to a second;
// an origin whose Dates show several clocks is read by each answer's own Date.
// The library prints nothing: an event hook reports what happens.
//
// A program that configures its own libcurl easy handles hands one to
// Client::perform, which runs it with the same rules and keeps its options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "abide/backoff.h"
#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/headers.h"
#include "abide/pacer.h"
#include "abide/planner.h"
#include "abide/signals.h"
#include "abide/version.h"

namespace abide {

class ProfileRegistry;  // abide/profiles.h

// Client works in the engine's own types (abide/engine.h): a request, each
// attempt and every event are the engine's; the names below keep the ones
// Client has always had.
//
// A Request as Client sends it (engine::Request): `method` is any token (HEAD
// sends no body and reads none); `url` is http:// or https:// only; `headers`
// are sent as given (a name or value with CR, LF or NUL is refused); `body` is
// sent when non-empty, and always for POST; `idempotency_key` is sent as the
// Idempotency-Key header, the same on every attempt, unless `headers` has one;
// a transfer still running at `deadline` is aborted.
using Request = engine::Request;
using Attempt = engine::Attempt;

// How a request ended: the engine's kinds (done, deferred, deadline_exceeded,
// not_retryable, exhausted, cancelled), and their to_string().
using OutcomeKind = engine::OutcomeKind;
using engine::to_string;

// The final outcome of one request: the engine's outcome (its kind, reason,
// last response head, attempts, waits and permitted time), and the body of
// that last response as Client read it (empty when it was streamed to a
// ResponseSink or a caller's write callback, or when no answer came).
struct RequestOutcome : engine::RequestOutcome {
  std::string body;
};

// What the event hook is told: the engine's events. `response` is the head
// only (the body is in the outcome fetch() returns), and the kFinished event's
// `outcome` is the engine's (without the body).
using ClientEvent = engine::Event;

// Called from the worker threads, possibly at once: must be thread-safe and
// quick. Pointers in the event are valid during the call only. Exceptions it
// throws are swallowed.
using EventHook = engine::EventHook;

// Which HTTP version a Client's own transfers speak (CURLOPT_HTTP_VERSION).
enum class HttpVersion : std::uint8_t {
  kDefault,  // libcurl's default (since 7.62: as kHttp2)
  kHttp1_1,  // HTTP/1.1 only, over TLS too
  // HTTP/2 over TLS when the server offers it in ALPN, else HTTP/1.1; on
  // cleartext (http://) HTTP/1.1, with no h2c upgrade and no prior knowledge.
  kHttp2,
};

// How a Client works: the engine's config (planner, attempts, pacer, how
// answers are read, clocks, randomness, event hook), and its transfers.
struct ClientConfig : engine::Config {
  Duration connect_timeout = std::chrono::seconds{10};
  Duration attempt_timeout{};  // one attempt's whole transfer; zero: none (only the deadline)
  // A stalled server: an attempt moving less than a byte a second, either
  // way, for this long ends (Attempt::timed_out); zero: never.
  Duration read_timeout{};
  // A kept body longer than this ends the request (not_retryable); a body
  // streamed to a ResponseSink or a caller's write callback has no cap.
  std::size_t max_body_bytes = std::size_t{64} << 20;
  // The most bytes of response head read per attempt (status line to empty
  // line, 1xx heads included). libcurl bounds a head too, whatever this says:
  // one header line may not pass 100 KiB (CURL_MAX_HTTP_HEADER), and since
  // libcurl 8.3 (and in distributions' patched 7.88) all heads of a transfer
  // may not pass 300 KiB, so a larger value here changes nothing beyond that.
  // A head over any of these ends the request at once, not retried (the same
  // head would come again): not_retryable with the limit it passed in the
  // reason, or the outcome the lines read before it give (a Retry-After among
  // them still holds the origin and sets not_before_wall).
  std::size_t max_header_bytes = std::size_t{256} << 10;
  std::string user_agent = "abide/" ABIDE_VERSION_STRING;  // "": no User-Agent of the client's own
  // libcurl's own fields: Accept: */*, and for a body without Content-Type,
  // application/x-www-form-urlencoded. false: a request carries its own
  // fields alone (a proxy forwards what its caller sent).
  bool default_fields = true;
  bool verify_tls = true;
  // A PEM file of CA certificates that verify servers instead of the system's
  // (CURLOPT_CAINFO): a private CA's upstream. Empty: the system's. A file
  // libcurl cannot load fails each TLS handshake, which is not retried.
  std::string ca_file;
  // The proxy URL for every transfer (CURLOPT_PROXY: "http://host:port",
  // https://, socks5h://...); hosts in no_proxy still bypass it, as in curl.
  // Empty: libcurl's default, which honours the http_proxy, https_proxy,
  // all_proxy and no_proxy environment variables. A proxy URL libcurl cannot
  // read ends each request at once, not_retryable, nothing sent.
  std::string proxy;
  // Ask for a compressed answer (Accept-Encoding with every coding this
  // libcurl decodes: gzip, deflate, and br and zstd where built in) and hand
  // on the decoded body: the body kept, a ResponseSink, max_body_bytes and
  // the outcome's body_bytes all see decoded bytes (not the bytes on the
  // wire). The head keeps the server's Content-Encoding and Content-Length.
  // Off: no Accept-Encoding is added, and a coded body is handed on as sent.
  bool decompress = false;
  HttpVersion http_version = HttpVersion::kDefault;
  // (connect_timeout to http_version apply to the client's own transfers;
  // perform() leaves a caller's handle as the caller configured it.)
  // The most transfers this client runs at once, over every thread and over
  // fetch, fetch_all and perform alike (0: no limit). An attempt beyond it
  // waits, after its pacer permit and in arrival order, for a transfer to
  // end. The wait is cancellable by the stop token and ends at the request's
  // deadline or send_by; an attempt that got no transfer was not sent (the
  // request ends cancelled, deferred past send_by, or deadline_exceeded). A
  // streamed answer holds its transfer until its body is all at the sink.
  std::size_t max_transfers = 0;
  // A LoopClient's connections to one origin at once (0: no limit; nginx's
  // max_conns): a transfer beyond waits in libcurl's queue for one to free.
  // To an HTTP/2 origin the transfers share the connections' streams: without
  // a bound, transfers that start together while the first connections are
  // still in their TLS handshake each open their own. (A Client's workers
  // each hold one connection already.)
  std::size_t max_host_connections = 0;
  // The bytes libcurl reads from a connection at a time for each transfer
  // (CURLOPT_BUFFERSIZE; clamped to [1 KiB, 512 KiB]; 0: libcurl's 16 KiB).
  // Each running transfer holds one: thousands of trickled streams at once
  // want it small; a large body costs more CPU in smaller reads. (A
  // LoopClient's own HTTP/1.1 exchanges read as much at a time into one
  // buffer that they share.)
  std::size_t receive_buffer_bytes = 0;
};

// How a batch runs.
struct BatchOptions {
  std::size_t jobs = 4;  // workers (each its own connection); clamped to [1, 256] and to the batch
  // Called (from a worker thread, one call at a time per worker) as soon as a
  // request has its outcome.
  std::function<void(std::size_t index, const RequestOutcome&)> on_done;
};

// libcurl's easy handle type (curl.h declares `typedef void CURL;`), named
// here so that this header needs no curl header: pass a CURL* where it is asked.
using CurlEasy = void;

// The write and header callbacks that a caller's handle had before
// Client::perform took them over for the call. libcurl cannot report an
// option's value, so the caller says what they were: abide hands the final
// answer to them, and sets them back on the handle afterwards. Leave a member
// null where the handle had libcurl's default. The types are libcurl's
// curl_write_callback; a write callback that returns anything but the size
// it was given (CURL_WRITEFUNC_PAUSE too: pausing is not supported) stops the
// transfer, and the request ends not_retryable.
struct HandleCallbacks {
  using Fn = std::size_t (*)(char* data, std::size_t size, std::size_t count, void* userdata);
  Fn write = nullptr;           // CURLOPT_WRITEFUNCTION (null: libcurl's fwrite into write_data)
  void* write_data = nullptr;   // CURLOPT_WRITEDATA (a FILE* for libcurl's fwrite)
  Fn header = nullptr;          // CURLOPT_HEADERFUNCTION
  void* header_data = nullptr;  // CURLOPT_HEADERDATA
};

// The final answer as ResponseSink::head is told it.
struct FinalHead {
  const engine::Response& response;  // status, header lines, receive times
  // How the request ends with this answer: kDone, or the outcome it gives
  // (deferred, deadline_exceeded, not_retryable, exhausted) as its last answer.
  OutcomeKind kind;
  // The request so far: its attempts, the time waited, the earliest permitted
  // next attempt when known (not_before_wall), ambiguous.
  const engine::RequestOutcome& outcome;
};

// Where Client::fetch(request, sink, stop) puts the final answer, as it
// arrives. head is called once, just before the first body byte reaches body
// (or when the transfer completes with an empty body, and for HEAD), and
// never for an answer that is retried: until a body byte is delivered, a
// transfer that breaks off is an attempt that failed (a GET is retried). Both
// run on the thread that called fetch, inside the transfer: a slow sink slows
// the transfer (nothing is buffered beyond libcurl's own buffer). An
// exception from either stops the transfer like false. An empty head or body
// function accepts everything.
struct ResponseSink {
  std::function<bool(const FinalHead&)> head;  // false: stop (the request ends not_retryable)
  engine::BodySink body;                       // chunks, no size cap; false stops the transfer (not_retryable)
};

// The client. Thread-safe: fetch() and fetch_all() may be called from many
// threads; all of them share the pacer and the connection pool.
class Client {
 public:
  explicit Client(ClientConfig config = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Runs one request to its outcome on the calling thread. The final
  // answer's body is kept in the outcome's body (up to max_body_bytes; a longer one
  // ends the request not_retryable). It is the final answer's only once it is
  // all in: a body that breaks off is an attempt that failed (a GET is
  // retried). `index` is the ClientEvent::index of this request's events, so
  // that a caller running its own batch can tell them apart (fetch_all gives
  // each request its place).
  RequestOutcome fetch(const Request& request, std::stop_token stop = {}, std::size_t index = 0);

  // Runs one request to its outcome on the calling thread, streaming the
  // final answer to `sink` as it arrives (no max_body_bytes cap; the
  // outcome's body then stays empty, and body_bytes counts the bytes
  // read of it). The engine decides on each answer's head: the body of an
  // answer that will be retried is dropped (a short one read to keep the
  // connection, a long one cut), and neither it nor its head reaches the
  // sink. A body that breaks off after some of it reached the sink ends the
  // request not_retryable (it is not fetched again behind the caller's
  // back); false from either callback ends it not_retryable and stops the
  // transfer. A stop ends the transfer as cancelled, unless the body was
  // all in already. `index` as for fetch() above.
  RequestOutcome fetch(const Request& request, const ResponseSink& sink, std::stop_token stop = {},
                       std::size_t index = 0);

  // Runs a batch on `options.jobs` workers; returns the outcomes in request
  // order. After a stop, requests not yet started end as cancelled at once.
  std::vector<RequestOutcome> fetch_all(std::span<const Request> requests, const BatchOptions& options = {},
                                        std::stop_token stop = {});

  // Runs one request to its outcome on a handle the caller configured
  // (curl_easy_init and curl_easy_setopt: proxy, TLS, authentication,
  // timeouts, CURLOPT_HTTPHEADER, CURLOPT_USERAGENT, a share handle, the
  // method and its body), with this client's rules, pacer and clocks, on the
  // calling thread. Every option is kept and the same handle is performed for
  // each attempt, except what abide must set:
  //   - CURLOPT_URL, to request.url before each attempt (libcurl cannot say
  //     which URL a handle holds before it runs); it stays set afterwards;
  //   - CURLOPT_WRITEFUNCTION/WRITEDATA and CURLOPT_HEADERFUNCTION/HEADERDATA
  //     for the call; afterwards they are `callbacks` again (libcurl's
  //     defaults where those are null).
  // The request states what the handle sends, for the rules: request.method
  // must be the method the handle sends (abide sets none; it decides on that
  // method whether a retry is safe, and a handle seen to send another method,
  // CURLINFO_EFFECTIVE_METHOD, is not repeated); idempotency_key states the
  // Idempotency-Key that the handle's CURLOPT_HTTPHEADER carries (abide adds no
  // header: libcurl cannot give the handle's header list back to add to).
  // request.headers and request.body must be empty (else not_retryable,
  // nothing sent); deadline, not_before and pacer_key work as for fetch().
  //
  // The final answer's body goes, as it arrives and without size cap, to
  // callbacks' write function (or libcurl's fwrite into write_data), and its
  // head lines to callbacks' header function (libcurl's rules), as they would
  // without abide; the answers that are retried reach neither. With neither
  // set, the body is kept in outcome.body (up to max_body_bytes).
  // Of the ClientConfig, the transfer settings (connect_timeout,
  // attempt_timeout, read_timeout, user_agent, default_fields, verify_tls,
  // ca_file, proxy, decompress, http_version) are the handle's own business: none is set on it;
  // max_header_bytes applies. Errors that would come again end the request
  // at once as for fetch(), judged on libcurl's code alone (the handle's
  // CURLOPT_ERRORBUFFER is the caller's and stays so): a TLS handshake
  // failure or a proxy URL libcurl cannot read, which only libcurl's error
  // text tells apart from a transient failure, is retried here. Redirects
  // the handle follows itself (CURLOPT_FOLLOWLOCATION) are its business: the
  // rules read the last answer, paced under request.url's origin. `stop`
  // aborts a transfer at once. The handle must not be in use elsewhere during the call (nor in a
  // multi handle).
  RequestOutcome perform(CurlEasy* handle, const Request& request, const HandleCallbacks& callbacks = {},
                         std::stop_token stop = {});

  Pacer& pacer() noexcept;
  const Planner& planner() const noexcept;
  const ClientConfig& config() const noexcept;

  // The origin of an http(s) URL ("https://api.example.com", with the port
  // when it is not the scheme's default; the host in lower case), or nullopt:
  // the core's abide::origin_of (abide/engine.h), kept under this name.
  static std::optional<std::string> origin_of(std::string_view url);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace abide
