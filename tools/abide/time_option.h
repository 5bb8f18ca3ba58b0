// A reusable CLI option for an instant given as RFC 3339 (e.g. --now).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "abide/clock.h"

namespace abide::cli {

// Adds `name` (e.g. "--now") taking an RFC 3339 date-time ("2026-11-29T22:30:00Z",
// optional fraction, Z or numeric offset) that is stored in `target`. A value
// that does not parse is a usage error (exit 2) naming the byte. `target` must
// outlive the parse (keep it in the command's options struct).
CLI::Option* add_time_option(CLI::App& app, const std::string& name, std::optional<WallTime>& target,
                             const std::string& help);

// The option's value, or the system wall clock's current time when not given.
WallTime time_or_now(const std::optional<WallTime>& t);

}  // namespace abide::cli
