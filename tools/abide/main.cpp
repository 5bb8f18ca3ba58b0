// abide: the command-line tool. Commands register themselves (command.h).
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "abide/version.h"
#include "command.h"

namespace abide::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

}  // namespace abide::cli

int main(int argc, char** argv) {
  using namespace abide::cli;
  CLI::App app{"abide: HTTP clients that obey servers (Retry-After, RateLimit, vendor quotas)", "abide"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "abide " ABIDE_VERSION_STRING);

  // Build the subcommand tree, parents first, commands sorted by path so that
  // help output is stable whatever the static-initialization order.
  auto& cmds = commands();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return a.path < b.path; });
  std::map<std::vector<std::string>, CLI::App*> nodes;
  std::vector<std::pair<CLI::App*, Run>> runs;
  for (const auto& cmd : cmds) {
    CLI::App* parent = &app;
    std::vector<std::string> prefix;
    for (std::size_t i = 0; i + 1 < cmd.path.size(); ++i) {
      prefix.push_back(cmd.path[i]);
      auto it = nodes.find(prefix);
      if (it == nodes.end()) {
        CLI::App* node = parent->add_subcommand(cmd.path[i]);
        node->require_subcommand(1);
        it = nodes.emplace(prefix, node).first;
      }
      parent = it->second;
    }
    CLI::App* leaf = parent->add_subcommand(cmd.path.back(), cmd.help);
    runs.emplace_back(leaf, cmd.setup(*leaf));
  }
  for (auto& [path, node] : nodes) {
    if (path.size() == 1 && path[0] == "parse") node->description("Parse a header value and print what it means");
    if (path.size() == 1 && path[0] == "format") node->description("Serialize a value to its canonical header form");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  for (auto& [leaf, run] : runs) {
    if (leaf->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        std::cerr << "abide: " << e.what() << "\n";
        return kExitRejected;
      }
    }
  }
  std::cerr << "abide: no command given (see --help)\n";
  return kExitUsage;
}
