// `abide explain`'s words for a person at a terminal: the decision first, then
// which signal won, what each signal said, what was ignored and why, the skew.
#pragma once

#include <span>
#include <string>

#include "abide/planner.h"
#include "abide/signals.h"

namespace abide::cli {

// Everything the explanation draws on.
struct ExplainContext {
  const Signals& signals;
  const Plan& plan;
  const PlanInput& input;
  const Planner& planner;
  std::span<const std::string> head_warnings;  // lines the head reader skipped
  std::string host;                            // as given (may be empty)
  std::string profile_option;                  // --profile as given ("", a name, or "none")
};

// The explanation, several lines, ending with a newline.
std::string explain_text(const ExplainContext& c);

// All warnings, in order: the head reader's, the response's, the planner's.
std::vector<std::string> explain_warnings(const ExplainContext& c);

}  // namespace abide::cli
