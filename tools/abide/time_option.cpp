#include "time_option.h"

#include "abide/http_date.h"

namespace abide::cli {

CLI::Option* add_time_option(CLI::App& app, const std::string& name, std::optional<WallTime>& target,
                             const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name](const std::string& text) {
            auto t = parse_rfc3339(text);
            if (!t) throw CLI::ValidationError(name, "not an RFC 3339 time (" + t.error().message() + ")");
            target = *t;
          },
          help)
      ->type_name("TIME");
}

WallTime time_or_now(const std::optional<WallTime>& t) { return t ? *t : system_wall_clock().now(); }

}  // namespace abide::cli
