// Heads and transfers over libcurl (see transfer.h).
#include "transfer.h"

#include <algorithm>

#include "ascii.h"
#include "transport.h"

namespace abide::curl_detail {
namespace {

using ascii::is_ows;
using ascii::trim_ows;

// The status of "HTTP/x yyy ...", or 0.
int status_of(std::string_view line) {
  const auto sp = line.find(' ');
  if (sp == std::string_view::npos || line.size() < sp + 4) return 0;
  int code = 0;
  for (std::size_t i = sp + 1; i < sp + 4; ++i) {
    if (!ascii::is_digit(line[i])) return 0;
    code = code * 10 + (line[i] - '0');
  }
  return code;
}

}  // namespace

bool HeadReader::line(std::string_view raw, const WallClock& wall, const MonotonicClock& mono) {
  bytes_ += raw.size();
  if (bytes_ > max_bytes_) {
    overflow_ = true;
    return false;
  }
  std::string_view line = raw;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {  // a new head (after 1xx, CONNECT or a redirect): start over
    lines_.clear();
    raw_.clear();
    complete_ = false;
    status_ = status_of(line);
    raw_.emplace_back(raw);
    return true;
  }
  if (complete_) return true;  // trailers: not part of the head
  raw_.emplace_back(raw);
  if (line.empty()) {  // the end of a head
    if (status_ >= 200) {
      complete_ = true;
      received_wall_ = wall.now();
      received_mono_ = mono.now();
    }
    return true;
  }
  if (is_ows(line.front())) {  // obsolete line folding: continues the previous value
    if (!lines_.empty()) {
      lines_.back().value += ' ';
      lines_.back().value += trim_ows(line);
    }
    return true;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || !valid_token(line.substr(0, colon))) return true;  // skipped
  lines_.push_back({std::string(line.substr(0, colon)), std::string(trim_ows(line.substr(colon + 1)))});
  return true;
}

HeaderList HeadReader::headers() const {
  HeaderList out;
  out.reserve(lines_.size());
  for (const Header& h : lines_) out.add(h.name, h.value);
  return out;
}

TransferEnd run_transfer(CURLM* multi, CURL* easy, std::stop_token stop,
                         std::optional<std::chrono::steady_clock::time_point> until) {
  TransferEnd end;
  std::stop_callback wake(stop, [multi] { curl_multi_wakeup(multi); });
  for (;;) {
    int running = 0;
    if (curl_multi_perform(multi, &running) != CURLM_OK) return end;
    int left = 0;
    bool finished = false;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
        end.code = msg->data.result;
        finished = true;
      }
    }
    if (finished) {
      end.kind = TransferEnd::Kind::kFinished;
      return end;
    }
    if (running == 0) return end;
    if (stop.stop_requested()) {
      end.kind = TransferEnd::Kind::kCancelled;
      return end;
    }
    int timeout_ms = 1000;
    if (until) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= *until) {
        end.kind = TransferEnd::Kind::kTimedOut;
        return end;
      }
      // Rounded up: the transfer is never cut before its time.
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*until - now).count();
      timeout_ms = static_cast<int>(std::min<std::int64_t>(ms, timeout_ms));
    }
    if (curl_multi_poll(multi, nullptr, 0, timeout_ms, nullptr) != CURLM_OK) return end;
  }
}

bool certain_before_send(CURLcode c) noexcept {
  switch (c) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_FAILED_INIT:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_INTERFACE_FAILED:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_PROXY:
    case CURLE_OUT_OF_MEMORY: return true;
    default: return false;
  }
}

}  // namespace abide::curl_detail
