#include "signals_json.h"

#include <chrono>
#include <string>

namespace abide::cli {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string byte_sequence(const std::string& bytes) {
  std::string out = ":";
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += kBase64[v & 63];
  }
  if (bytes.size() - i == 1) {
    const unsigned v = byte(i) << 16;
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const unsigned v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += '=';
  }
  out += ':';
  return out;
}

bool printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// JSON needs valid UTF-8: anything else is replaced (server text is untrusted).
std::string safe_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    }
    if (ok && len == 3) {
      const unsigned b1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(b == 0xE0 && b1 < 0xA0) && !(b == 0xED && b1 >= 0xA0);
    } else if (ok && len == 4) {
      const unsigned b1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(b == 0xF0 && b1 < 0x90) && !(b == 0xF4 && b1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json duration_or_null(const std::optional<Duration>& d) {
  return d ? seconds_json(*d) : nlohmann::ordered_json(nullptr);
}

}  // namespace

nlohmann::ordered_json seconds_json(Duration d) {
  if (d.count() % 1'000'000'000 == 0) return nlohmann::ordered_json(d.count() / 1'000'000'000);
  return nlohmann::ordered_json(to_seconds(d));
}

nlohmann::ordered_json quota_json(const QuotaObservation& q) {
  nlohmann::ordered_json j;
  j["policy"] = q.policy.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(safe_text(q.policy));
  j["limit"] = or_null(q.limit);
  j["remaining"] = or_null(q.remaining);
  j["window_s"] = duration_or_null(q.window);
  j["reset_s"] = duration_or_null(q.reset);
  j["unit"] = safe_text(q.unit);
  if (!q.partition_key) {
    j["partition_key"] = nullptr;
  } else {
    j["partition_key"] = printable(*q.partition_key) ? *q.partition_key : byte_sequence(*q.partition_key);
  }
  j["source"] = safe_text(q.source);
  j["confidence"] = q.confidence == Confidence::kHigh ? "high" : "low";
  return j;
}

nlohmann::ordered_json quota_list_json(std::span<const QuotaObservation> quota) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& q : quota) list.push_back(quota_json(q));
  return list;
}

nlohmann::ordered_json retry_hint_json(const std::optional<RetryHint>& hint) {
  if (!hint) return nullptr;
  nlohmann::ordered_json j;
  j["kind"] = hint->kind == RetryHint::Kind::kDate ? "date" : "delay";
  j["seconds"] = seconds_json(hint->wait);
  if (hint->date) {
    j["unix"] = std::chrono::floor<std::chrono::seconds>(hint->date->time_since_epoch()).count();
  } else {
    j["unix"] = nullptr;
  }
  j["source"] = hint->source;
  return j;
}

nlohmann::ordered_json signals_json(const Signals& s, std::span<const std::string> extra_warnings) {
  nlohmann::ordered_json j;
  j["quota"] = quota_list_json(s.quota);
  j["retry_after"] = retry_hint_json(s.retry_after);
  j["clock_skew_s"] = duration_or_null(s.clock_skew);
  nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
  for (const auto& w : extra_warnings) warnings.push_back(safe_text(w));
  for (const auto& w : s.warnings) warnings.push_back(safe_text(w));
  j["warnings"] = std::move(warnings);
  return j;
}

}  // namespace abide::cli
