// The CLI's command registry. A command file defines one static Registration:
//
//   static const Registration reg{{"parse", "http-date"}, "Parse an HTTP-date",
//       [](CLI::App& app) -> Run { auto opts = ...; app.add_option(...); return [opts] { ... return 0; }; }};
//
// main() builds the CLI11 tree from every registration and runs the chosen one.
// A Run returns the process exit status: 0 success, 1 rejected input or outcome
// (with a message on stderr), 2 usage error.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace abide::cli {

using Run = std::function<int()>;
using Setup = std::function<Run(CLI::App&)>;

struct Command {
  std::vector<std::string> path;  // e.g. {"parse", "http-date"}
  std::string help;
  Setup setup;
};

// All registered commands.
std::vector<Command>& commands();

// Registers a command at static-initialization time.
struct Registration {
  Registration(std::vector<std::string> path, std::string help, Setup setup) {
    commands().push_back({std::move(path), std::move(help), std::move(setup)});
  }
};

// Exit statuses of the command-line contract.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRejected = 1;
inline constexpr int kExitUsage = 2;

}  // namespace abide::cli
