// Test and benchmark support: the argv of a program to exec, as execv takes it.
#pragma once

#include <string>
#include <vector>

namespace abide::test {

// argv as execv takes it, made before fork(): a child of a threaded process
// (a test with its server on a thread) may do nothing but async-signal-safe
// calls until it execs, and allocating is not one (another thread may hold
// the allocator's lock at the fork, and the child would wait for it forever).
// Valid while `args` lives.
inline std::vector<char*> exec_argv(const std::vector<std::string>& args) {
  std::vector<char*> out;
  out.reserve(args.size() + 1);
  for (const auto& a : args) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace abide::test
