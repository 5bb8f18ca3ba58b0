// Redaction: what a program shows of its requests (an event hook's log line, a
// verbose trace, a summary to share) without the credentials they carry.
//
// Names are matched generously: a name that merely looks like a credential is
// hidden too, since showing a secret once is worse than hiding a harmless value.
// Standard library only.
#pragma once

#include <string>
#include <string_view>

namespace abide {

// What stands in for a hidden value.
inline constexpr std::string_view kRedacted = "[redacted]";

// True for a header whose value may be a credential, in any case:
// Authorization, Proxy-Authorization, Cookie, Set-Cookie, and names that
// contain auth, key, token, secret, passw(ord), pwd, signature, sess(ion),
// credential, bearer, jwt, csrf, xsrf or ticket, or that are exactly sig, code,
// sid or pass. Idempotency-Key is not one (and is useful to see).
[[nodiscard]] bool is_sensitive_header(std::string_view name) noexcept;

// The value to show for a header: kRedacted when the name is sensitive; for a
// header that carries a URL (Location, Content-Location, Referer) the URL
// through redact_url(); then through abide::printable() (no control byte
// reaches a terminal; at most 1024 bytes shown).
[[nodiscard]] std::string printable_header_value(std::string_view name, std::string_view value);

// The URL with its credentials replaced by kRedacted, everything else as
// given (the result is not made printable: a URL a server sent still goes
// through abide::printable() before it is shown):
//   - the userinfo: everything before the last '@' of the authority
//     ("https://user:pw@host/" -> "https://[redacted]@host/"), also without a
//     scheme or with any number of slashes or backslashes after it, as URL
//     parsers that guess accept them ("user:pw@host/path", "http:/u:p@host");
//   - the value of every credential-named parameter (the names of
//     is_sensitive_header(), after percent-decoding and '+' as a space, so
//     "%61ccess_token" and "API%5FKEY" count) in the query, in the fragment
//     (OAuth's implicit flow sends "#access_token=..."; single-page apps route
//     with "#/path?name=value") and in path parameters ("/a;jsessionid=...").
//     A hidden value runs to the next '&' (in the query also to '#'; in a path
//     to the next '/'), so a value holding ';' or '?' is hidden whole.
// When the authority cannot be read without guessing (a port that is not
// digits, a byte no host name holds), nothing after the scheme is shown:
// "http://[redacted]". A URL parser that knows better (libcurl's, where it is
// linked) can check the URL first.
[[nodiscard]] std::string redact_url(std::string_view url);

}  // namespace abide
