// Internal: what the planner's tests and tools need beyond abide/planner.h.
// Not installed.
#pragma once

#include "abide/planner.h"
#include "abide/quota.h"

namespace abide {

// Basis of a quota observation: kRateLimit for the IETF forms
// (is_ietf_draft(source)), kVendor for everything else (a profile, the heuristic).
Basis quota_basis(const QuotaObservation& q) noexcept;

}  // namespace abide
