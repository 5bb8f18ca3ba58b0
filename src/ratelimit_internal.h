// Internal: read_ratelimit over a prepared line index (observe() builds one
// index per response and shares it between the readers).
#pragma once

#include <string>
#include <vector>

#include "abide/ratelimit.h"
#include "line_index.h"

namespace abide::detail {

// Reads the fields of `headers`; `index` (an index of the same headers) is
// needed only when options.prefix is not empty.
void read_ratelimit(const HeaderList& headers, const LineIndex* index, std::vector<QuotaObservation>& quota,
                    std::vector<std::string>& warnings, const RateLimitOptions& options);

}  // namespace abide::detail
