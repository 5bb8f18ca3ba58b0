// Internal: what an answer's body says its request used, read as the body
// passes on its way to the caller (the engine's tap in front of the sink): a
// JSON body kept up to a bound and read at its end, or an event stream read
// event by event. Not installed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/profiles.h"
#include "abide/quota.h"
#include "llm/usage.h"

namespace abide::detail {

class UsageTap {
 public:
  // A JSON body longer than this is not kept: its usage is not read (the
  // reservation stands, which only ever restrains).
  static constexpr std::size_t kMaxKeptBody = 1 << 20;

  UsageTap(CostRule rule, bool event_stream) : rule_(rule) {
    if (event_stream) sse_.emplace(rule);
  }

  void feed(std::string_view chunk) {
    if (sse_) {
      sse_->feed(chunk);
    } else if (!over_) {
      if (chunk.size() > kMaxKeptBody - body_.size()) {
        over_ = true;
        std::string{}.swap(body_);
      } else {
        body_.append(chunk);
      }
    }
  }

  // The usage the body stated, once it is whole (nullopt: none that is valid).
  [[nodiscard]] std::optional<std::vector<UnitCost>> usage() const {
    if (sse_) return sse_->usage();
    if (over_) return std::nullopt;
    return usage_from_json(rule_, body_);
  }

 private:
  CostRule rule_;
  std::optional<SseUsageReader> sse_;
  std::string body_;
  bool over_ = false;
};

}  // namespace abide::detail
