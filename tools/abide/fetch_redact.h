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

// The value to print for a header: "[redacted]" when the name is sensitive,
// else the value through abide::printable() (no control byte reaches a
// terminal; at most 1024 bytes shown).
std::string printable_header_value(std::string_view name, std::string_view value);

// The URL with any user:password and the values of credential-like
// parameters (key, token, secret, signature, OAuth's code, ...) replaced by
// "[redacted]", in the query and in the fragment (OAuth's implicit flow sends
// "#access_token=..."). Names are compared after percent-decoding, in any case
// ("%61ccess_token", "API%5FKEY").
std::string redact_url(std::string_view url);

}  // namespace abide::cli
