// Redaction for `abide fetch --verbose`: credentials never reach the terminal
// or a log.
#pragma once

#include <string>
#include <string_view>

namespace abide::cli {

// True for Authorization, Proxy-Authorization, Cookie, Set-Cookie and
// API-key-style names (anything naming a key, token, secret, password,
// signature, session or auth), in any case.
bool is_sensitive_header(std::string_view name) noexcept;

// The value to print for a header: "[redacted]" when the name is sensitive.
std::string printable_header_value(std::string_view name, std::string_view value);

// The URL with the values of credential-like query parameters (key, token,
// secret, signature, ...) and any user:password replaced by "[redacted]".
std::string redact_url(std::string_view url);

}  // namespace abide::cli
