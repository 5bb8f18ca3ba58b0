// Internal: read_ratelimit over the response's field index (observe() builds
// one index per response and shares it between the readers).
#pragma once

#include <string>
#include <vector>

#include "abide/ratelimit.h"
#include "field_index.h"

namespace abide::detail {

// Reads the fields of index.headers(): the unprefixed ones by the kinds the
// index gave the lines, prefixed ones (options.prefix) through its lookup.
void read_ratelimit(const FieldIndex& index, std::vector<QuotaObservation>& quota, std::vector<std::string>& warnings,
                    const RateLimitOptions& options);

}  // namespace abide::detail
