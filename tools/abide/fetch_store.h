// `abide fetch --store`: where the pacer keeps quota state.
#pragma once

#include <memory>
#include <string>

#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide::cli {

// A parsed --store value: "memory", or "redis://HOST:PORT[/PREFIX]".
struct StoreSpec {
  bool redis = false;
  std::string host;
  int port = 6379;
  std::string prefix = "abide";
};

// Parses a --store value; an error message says what is wrong.
Result<StoreSpec, std::string> parse_store_spec(const std::string& text);

// Opens the store (connects to Redis). An error message when it cannot.
Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec);

}  // namespace abide::cli
