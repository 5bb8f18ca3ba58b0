// Internal: a wait stated in a limited answer's body (body_hint.h).
#include "body_hint.h"

#include <algorithm>
#include <string>
#include <vector>

#include "abide/headers.h"
#include "ascii.h"
#include "llm/json_fields.h"
#include "profile_values.h"

namespace abide::detail {

namespace {

constexpr std::size_t kMaxShownValue = 48;    // of the value quoted in a source
constexpr std::size_t kMaxOccurrences = 16;   // sentences or details looked at per body
constexpr std::size_t kMaxDurationText = 64;  // a duration's text after "try again in"
constexpr std::string_view kRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo";
constexpr std::string_view kTryAgain = "try again in";

// A reading before the cap: nullopt for overflow (the parsers saturate there).
std::optional<Duration> capped(std::optional<Duration> d) noexcept {
  if (!d || *d < Duration::zero() || *d >= kMaxDuration) return std::nullopt;
  return std::min(*d, kMaxBodyHintWait);
}

// A server's value in a source: printable ASCII, at most kMaxShownValue
// characters and "..." (escapes widen a byte to four characters).
std::string shown(std::string_view v) {
  std::string s = printable(v, kMaxShownValue);
  if (s.size() > kMaxShownValue + 3) s.replace(kMaxShownValue, std::string::npos, "...");
  return s;
}

// Keeps the longer of two readings: several statements of a wait all hold.
void keep_longest(std::optional<BodyHint>& best, BodyHint h) {
  if (!best || h.wait > best->wait) best = std::move(h);
}

// ---- google.rpc.RetryInfo ----------------------------------------------------------

// A protobuf Duration in its JSON form: decimal seconds, up to 9 fraction
// digits, and "s" ("52s", "0.5s", "1.000340s"). No sign is accepted: a
// negative wait means nothing. Further fraction digits round up.
std::optional<Duration> protobuf_duration(std::string_view v) noexcept {
  if (v.size() < 2 || v.back() != 's') return std::nullopt;
  v.remove_suffix(1);
  return capped(parse_decimal_duration(v, std::chrono::seconds{1}));
}

// The RetryInfo details of one error object ({"error": {"details": [...]}}).
void retry_info(const JsonValue* root, std::optional<BodyHint>& best) {
  const JsonValue* details = member(member(root, "error"), "details");
  if (details == nullptr || details->kind != JsonValue::Kind::kArray) return;
  const std::size_t n = std::min(details->items.size(), kMaxOccurrences);
  for (std::size_t i = 0; i < n; ++i) {
    const JsonValue* d = &details->items[i];
    if (string_member(d, "@type") != kRetryInfoType) continue;
    const auto delay = string_member(d, "retryDelay");
    if (!delay) continue;
    const auto wait = protobuf_duration(*delay);
    if (!wait) continue;
    keep_longest(best, BodyHint{*wait, "body: error.details[].retryDelay \"" + shown(*delay) + "\""});
  }
}

// Gemini's REST answers are one error object; its streaming endpoints answer
// with a JSON array of them.
std::optional<BodyHint> google_retry_info(const JsonValue* json) {
  if (json == nullptr) return std::nullopt;
  std::optional<BodyHint> best;
  if (json->kind == JsonValue::Kind::kArray) {
    const std::size_t n = std::min(json->items.size(), kMaxOccurrences);
    for (std::size_t i = 0; i < n; ++i) retry_info(&json->items[i], best);
  } else {
    retry_info(json, best);
  }
  return best;
}

// ---- "try again in 1.5s" --------------------------------------------------------------

// Bytes a Go-like duration is written with: digits, '.', the unit letters
// (ns, us, ms, s, m, h, in any case) and the bytes of µ and μ.
bool duration_byte(char c) noexcept {
  const char l = ascii::to_lower(c);
  const auto u = static_cast<unsigned char>(c);
  return ascii::is_digit(c) || c == '.' || l == 'n' || l == 's' || l == 'u' || l == 'm' || l == 'h' || u == 0xC2 ||
         u == 0xB5 || u == 0xCE || u == 0xBC;
}

// The duration after one "try again in", read up to the first byte that
// cannot be part of it ("1.5s. Visit ..." reads "1.5s").
std::optional<BodyHint> sentence_at(std::string_view rest) {
  std::size_t i = 0;
  while (i < rest.size() && i < 3 && rest[i] == ' ') ++i;
  std::size_t end = i;
  while (end < rest.size() && duration_byte(rest[end])) {
    // Cut short, a duration could read shorter than it is: none is read.
    if (++end - i > kMaxDurationText) return std::nullopt;
  }
  std::string_view text = rest.substr(i, end - i);
  while (!text.empty() && text.back() == '.') text.remove_suffix(1);  // the sentence's full stop
  std::string lower(text);
  for (char& c : lower) c = ascii::to_lower(c);
  const auto wait = capped(parse_go_duration(lower));
  if (!wait) return std::nullopt;
  return BodyHint{*wait, "body: \"try again in " + shown(text) + "\""};
}

// Every "try again in" of a text (any case), the longest valid wait.
void sentences(std::string_view text, std::optional<BodyHint>& best) {
  std::size_t found = 0;
  for (std::size_t i = 0; i + kTryAgain.size() <= text.size() && found < kMaxOccurrences; ++i) {
    if (!ascii::iequals(text.substr(i, kTryAgain.size()), kTryAgain)) continue;
    ++found;
    if (auto h = sentence_at(text.substr(i + kTryAgain.size()))) keep_longest(best, std::move(*h));
  }
}

// The error message of a JSON error body: error.message, else a top-level
// message (an array of error objects: each one's).
void json_messages(const JsonValue* json, std::optional<BodyHint>& best) {
  if (json->kind == JsonValue::Kind::kArray) {
    const std::size_t n = std::min(json->items.size(), kMaxOccurrences);
    for (std::size_t i = 0; i < n; ++i) {
      if (json->items[i].kind != JsonValue::Kind::kArray) json_messages(&json->items[i], best);
    }
    return;
  }
  if (const auto m = string_member(member(json, "error"), "message")) {
    sentences(*m, best);
  } else if (const auto top = string_member(json, "message")) {
    sentences(*top, best);
  }
}

std::optional<BodyHint> try_again_sentence(const JsonValue* json, std::string_view body) {
  std::optional<BodyHint> best;
  if (json != nullptr) {
    json_messages(json, best);
  } else {
    sentences(body, best);
  }
  return best;
}

}  // namespace

std::optional<BodyHint> read_body_hint(std::span<const BodyHintKind> kinds, std::string_view body) {
  if (kinds.empty() || body.empty() || body.size() > kMaxBodyHintBytes) return std::nullopt;
  const auto json = parse_bounded_json(body, kMaxBodyHintBytes);
  const JsonValue* root = json ? &*json : nullptr;
  for (const BodyHintKind kind : kinds) {
    std::optional<BodyHint> h;
    switch (kind) {
      case BodyHintKind::kGoogleRetryInfo: h = google_retry_info(root); break;
      case BodyHintKind::kTryAgainSentence: h = try_again_sentence(root, body); break;
    }
    if (h) return h;
  }
  return std::nullopt;
}

bool apply_body_hint(std::span<const BodyHintKind> kinds, std::string_view body, Signals& s) {
  std::optional<BodyHint> hint = read_body_hint(kinds, body);
  if (!hint) return false;
  const bool sentence = !kinds.empty() && kinds.front() == BodyHintKind::kTryAgainSentence &&
                        hint->source.find("retryDelay") == std::string::npos;
  if (s.retry_after) {
    if (sentence || hint->wait <= s.retry_after->wait) return false;
    s.warnings.push_back(hint->source + " asks for longer than " + s.retry_after->source + "; the longer wait is used");
  }
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, hint->wait, std::nullopt, std::move(hint->source)};
  return true;
}

}  // namespace abide::detail
