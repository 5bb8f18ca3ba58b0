// The quota model's labels (abide/quota.h).
#include "abide/quota.h"

namespace abide {

std::string_view to_string(QuotaSource s) noexcept {
  switch (s) {
    case QuotaSource::kUnknown: return "";
    case QuotaSource::kDraft03: return "draft-03";
    case QuotaSource::kDraft06: return "draft-06";
    case QuotaSource::kDraft07: return "draft-07";
    case QuotaSource::kDraft08: return "draft-08";
    case QuotaSource::kDraft12Provisional: return "draft-12 (provisional)";
    case QuotaSource::kDraftPolli00: return "draft-polli-00";
    case QuotaSource::kVendor: return "vendor";
    case QuotaSource::kHeuristic: return "heuristic";
  }
  return "";
}

}  // namespace abide
