#include "signals_json.h"

#include <chrono>
#include <string>

#include "abide/headers.h"
#include "base64.h"
#include "common.h"

namespace abide::cli {
namespace {

// Policy names, units and sources are short; a longer one is cut (with "...").
constexpr std::size_t kMaxServerString = 256;

std::string byte_sequence(const std::string& bytes) {
  std::string out = ":";
  detail::append_base64(out, bytes);
  out += ':';
  return out;
}

// Every bare byte value is printable ASCII: shown as it is, else as an SF
// Byte Sequence.
bool printable_ascii(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// A string a server (or a profile) supplied, for JSON: through
// abide::printable(), so no control byte and nothing that is not UTF-8.
std::string server_string(std::string_view s) { return abide::printable(s, kMaxServerString); }

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
  j["policy"] = q.policy.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(server_string(q.policy));
  j["limit"] = or_null(q.limit);
  j["remaining"] = or_null(q.remaining);
  j["window_s"] = duration_or_null(q.window);
  j["reset_s"] = duration_or_null(q.reset);
  j["unit"] = server_string(q.unit);
  if (!q.partition_key) {
    j["partition_key"] = nullptr;
  } else {
    j["partition_key"] = printable_ascii(*q.partition_key) ? *q.partition_key : byte_sequence(*q.partition_key);
  }
  j["source"] = server_string(q.source_name());
  j["confidence"] = q.confidence == Confidence::kHigh ? "high" : "low";
  j["cost"] = or_null(q.cost);
  j["reset_is_full_refill"] = q.reset_is_full_refill;
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
  j["source"] = server_string(hint->source);
  return j;
}

nlohmann::ordered_json should_retry_json(const Signals& s) { return or_null(s.should_retry); }

nlohmann::ordered_json signals_json(const Signals& s, std::span<const std::string> extra_warnings) {
  nlohmann::ordered_json j;
  j["quota"] = quota_list_json(s.quota);
  j["retry_after"] = retry_hint_json(s.retry_after);
  j["clock_skew_s"] = duration_or_null(s.clock_skew);
  j["should_retry"] = should_retry_json(s);
  nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
  // Warnings carry server bytes already made printable where they were written.
  for (const auto& w : extra_warnings) warnings.push_back(safe_text(w));
  for (const auto& w : s.warnings) warnings.push_back(safe_text(w));
  j["warnings"] = std::move(warnings);
  return j;
}

}  // namespace abide::cli
