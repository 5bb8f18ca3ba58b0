#include "common.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "command.h"

namespace abide::cli {

std::optional<std::string> read_input(const std::string& path) {
  if (path.empty() || path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "abide: cannot read " << path << "\n";
    return std::nullopt;
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int reject(std::string_view what) {
  std::cerr << "abide: " << what << "\n";
  return kExitRejected;
}

}  // namespace abide::cli
