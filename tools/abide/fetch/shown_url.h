// How `abide fetch` shows a URL (on stderr, in --stats): with its credentials
// redacted (abide::redact_url), after libcurl's URL parser, the one the
// transfer itself uses, has read it.
#pragma once

#include <string>
#include <string_view>

namespace abide::cli {

// What stands for a URL that libcurl cannot parse: no guess at which part of
// it is a credential.
inline constexpr std::string_view kUnparsedUrl = "[redacted: a URL libcurl cannot parse]";

// The URL to show: kUnparsedUrl when libcurl rejects it (as the transfer then
// does too); kUnparsedUrl as well when libcurl finds a user name or password
// that redact_url() did not hide (the two readings disagree); else
// redact_url(url).
std::string shown_url(std::string_view url);

}  // namespace abide::cli
