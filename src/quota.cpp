// The quota model's labels (abide/quota.h).
#include "abide/quota.h"

namespace abide {

std::string_view to_string(QuotaSource s) noexcept {
  switch (s) {
    case QuotaSource::kUnknown:
      return "";
    case QuotaSource::kDraft03:
      return "draft-03";
    case QuotaSource::kDraft06:
      return "draft-06";
    case QuotaSource::kDraft07:
      return "draft-07";
    case QuotaSource::kDraft08:
      return "draft-08";
    case QuotaSource::kDraft12Provisional:
      return "draft-12 (provisional)";
    case QuotaSource::kDraftPolli00:
      return "draft-polli-00";
    case QuotaSource::kVendor:
      return "vendor";
    case QuotaSource::kHeuristic:
      return "heuristic";
  }
  return "";
}

QuotaSourceField& QuotaSourceField::operator=(std::string_view former) noexcept {
  value_ = former.empty() ? QuotaSource::kUnknown : QuotaSource::kVendor;
  for (QuotaSource s : {QuotaSource::kDraft03, QuotaSource::kDraft06, QuotaSource::kDraft07, QuotaSource::kDraft08,
                        QuotaSource::kDraft12Provisional, QuotaSource::kDraftPolli00, QuotaSource::kHeuristic}) {
    if (former == to_string(s)) value_ = s;
  }
  return *this;
}

}  // namespace abide
