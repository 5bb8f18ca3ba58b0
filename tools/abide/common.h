// Helpers shared by the CLI's commands.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace abide::cli {

// Reads a whole file, or standard input when path is empty or "-".
// Returns nullopt (and prints a message) when it cannot be read.
std::optional<std::string> read_input(const std::string& path);

// Prints "abide: <what>" on stderr and returns kExitRejected.
int reject(std::string_view what);

}  // namespace abide::cli
