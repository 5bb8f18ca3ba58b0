// Redaction (abide/redact.h): every test names a credential that must not
// survive, and checks the parts around it that must.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "abide/redact.h"

namespace abide {
namespace {

constexpr std::string_view kSecret = "S3cr3tV4lue";

bool shows_secret(const std::string& shown) { return shown.find(kSecret) != std::string::npos; }

std::string with_secret(std::string_view before, std::string_view after = {}) {
  return std::string(before) + std::string(kSecret) + std::string(after);
}

// ---- headers -----------------------------------------------------------------

TEST(RedactHeader, CredentialHeadersInAnyCase) {
  for (const char* name : {"Authorization",
                           "authorization",
                           "AUTHORIZATION",
                           "Proxy-Authorization",
                           "Cookie",
                           "set-cookie",
                           "X-Api-Key",
                           "x-API-KEY",
                           "Api-Key",
                           "X-Auth-Token",
                           "Private-Token",
                           "X-Amz-Security-Token",
                           "X-Hub-Signature-256",
                           "X-Client-Secret",
                           "X-Password",
                           "X-Session-Id",
                           "PHPSESSID",
                           "X-CSRF-Token",
                           "X-XSRF-TOKEN",
                           "X-Bearer",
                           "X-Jwt",
                           "X-Credentials",
                           "Sig",
                           "code",
                           "SID",
                           "pass",
                           "X-Pwd",
                           "Ticket",
                           "Ocp-Apim-Subscription-Key"}) {
    EXPECT_TRUE(is_sensitive_header(name)) << name;
    EXPECT_EQ(printable_header_value(name, kSecret), kRedacted) << name;
  }
}

TEST(RedactHeader, OrdinaryHeadersAreShown) {
  for (const char* name : {"Content-Type", "Retry-After", "RateLimit", "Idempotency-Key", "idempotency-key", "Date",
                           "Accept", "X-Request-Id", "Design", "Zip-Code", "Side", "Compass"}) {
    EXPECT_FALSE(is_sensitive_header(name)) << name;
  }
  EXPECT_EQ(printable_header_value("Retry-After", "120"), "120");
}

// Quota fields that count tokens are what a log reader needs, not credentials.
TEST(RedactHeader, QuotaFieldsOfTokensAreShown) {
  for (const char* name : {"x-ratelimit-remaining-tokens", "X-RateLimit-Limit-Tokens", "x-ratelimit-reset-tokens",
                           "anthropic-ratelimit-input-tokens-remaining", "RateLimit-Policy"}) {
    EXPECT_FALSE(is_sensitive_header(name)) << name;
  }
  EXPECT_EQ(printable_header_value("x-ratelimit-remaining-tokens", "1850"), "1850");
  EXPECT_TRUE(is_sensitive_header("x-api-key"));
}

TEST(RedactHeader, ShownValuesAreMadePrintable) {
  EXPECT_EQ(printable_header_value("X-Note", "a\x1b[2Jb"), "a\\x1b[2Jb");
  const std::string shown = printable_header_value("X-Big", std::string(5000, 'a'));
  EXPECT_LE(shown.size(), 1024u + 3u);
  EXPECT_TRUE(shown.ends_with("..."));
}

TEST(RedactHeader, UrlsInLocationHeadersAreRedacted) {
  for (const char* name : {"Location", "location", "Content-Location", "Referer"}) {
    const std::string shown = printable_header_value(name, with_secret("https://app.example/cb?code=", "&state=1"));
    EXPECT_FALSE(shows_secret(shown)) << name << ": " << shown;
    EXPECT_EQ(shown, "https://app.example/cb?code=[redacted]&state=1") << name;
  }
}

// ---- URLs: what stays ------------------------------------------------------------

TEST(RedactUrl, AUrlWithoutCredentialsIsUnchanged) {
  for (const char* url :
       {"https://api.example.com/v1/items?page=2&per_page=50#top", "http://127.0.0.1:8080/", "http://[::1]:8443/x?y=1",
        "https://host/a;b=1/c", "https://host/users/@me", "https://host/search?q=a@b.c", "host:8080/path?page=1",
        "/relative?x=1", "https://host:/", "https://xn--bcher-kva.example/", "/a;b=1?c=2",
        "https://b\xc3\xbc"
        "cher.example/",
        "https://host"}) {
    EXPECT_EQ(redact_url(url), url);
  }
}

// ---- URLs: userinfo ---------------------------------------------------------------

TEST(RedactUrl, UserinfoIsHiddenWhole) {
  EXPECT_EQ(redact_url(with_secret("https://user:", "@api.example.com/x?page=2")),
            "https://[redacted]@api.example.com/x?page=2");
  EXPECT_EQ(redact_url(with_secret("https://", "@host/")), "https://[redacted]@host/");  // a token as user
  EXPECT_EQ(redact_url(with_secret("https://user:", "@[::1]:8443/")), "https://[redacted]@[::1]:8443/");
  // The last '@' of the authority ends the userinfo, as URL parsers read it.
  EXPECT_EQ(redact_url(with_secret("https://us@er:", "@host/")), "https://[redacted]@host/");
  // An '@' after the authority is not userinfo.
  EXPECT_EQ(redact_url("https://host/path@x"), "https://host/path@x");
}

TEST(RedactUrl, UserinfoWithoutTheUsualSlashes) {
  // Parsers that guess a scheme send "user:pw@host/path" to http://host/path.
  EXPECT_EQ(redact_url(with_secret("user:", "@host/path")), "[redacted]@host/path");
  for (const std::string& url : {with_secret("http:/user:", "@host/p"), with_secret("http:\\\\user:", "@host/p"),
                                 with_secret("http:user:", "@host/p"), with_secret("//user:", "@host/p"),
                                 with_secret("HTTPS:///user:", "@host/p")}) {
    const std::string shown = redact_url(url);
    EXPECT_FALSE(shows_secret(shown)) << url << " -> " << shown;
    EXPECT_NE(shown.find("[redacted]@host/p"), std::string::npos) << shown;
  }
}

TEST(RedactUrl, AnAuthorityThatCannotBeSplitIsHiddenWhole) {
  // A password with an unencoded '#', '?' or '/' ends the authority early; the
  // rest cannot be told apart from it.
  for (const std::string& url : {with_secret("https://user:p#", "@host/"), with_secret("https://user:p?", "@host/"),
                                 with_secret("https://user:p/", "@host/"), with_secret("https://user:", " x/"),
                                 with_secret("https://host:", "/")}) {
    const std::string shown = redact_url(url);
    EXPECT_FALSE(shows_secret(shown)) << url << " -> " << shown;
    EXPECT_EQ(shown, "https://[redacted]") << url;
  }
}

// ---- URLs: parameters ---------------------------------------------------------------

TEST(RedactUrl, CredentialParametersInTheQuery) {
  for (const char* name :
       {"access_token", "token", "api_key", "apikey", "key", "client_secret", "password", "signature", "sig", "code",
        "X-Amz-Credential", "X-Amz-Signature", "sessionid", "jwt", "ACCESS_TOKEN", "Api-Key", "auth"}) {
    const std::string url = "https://host/p?page=2&" + std::string(name) + "=" + std::string(kSecret) + "&state=xyz";
    const std::string shown = redact_url(url);
    EXPECT_EQ(shown, "https://host/p?page=2&" + std::string(name) + "=[redacted]&state=xyz") << name;
  }
  EXPECT_EQ(redact_url(with_secret("https://host/?token=")), "https://host/?token=[redacted]");
  EXPECT_EQ(redact_url(with_secret("https://host/?a=1;token=", ";b=2")), "https://host/?a=1;token=[redacted]");
}

TEST(RedactUrl, PercentEncodedAndPlusNamesAreDecodedFirst) {
  for (const char* name : {"%61ccess_token", "api%5Fkey", "API%5FKEY", "%74%6F%6B%65%6E", "api+key", "%41uth"}) {
    const std::string url = "https://host/?" + std::string(name) + "=" + std::string(kSecret);
    EXPECT_EQ(redact_url(url), "https://host/?" + std::string(name) + "=[redacted]") << name;
  }
}

TEST(RedactUrl, CredentialParametersInTheFragment) {
  EXPECT_EQ(
      redact_url(with_secret("https://app/cb#access_token=", "&token_type=bearer&state=1")),
      "https://app/cb#access_token=[redacted]&token_type=[redacted]&state=1");  // token_type: a name that looks like one
  EXPECT_EQ(redact_url(with_secret("https://app/#/route?id_token=", "&page=2")),
            "https://app/#/route?id_token=[redacted]&page=2");
  EXPECT_EQ(redact_url(with_secret("https://app/?page=1#token=")), "https://app/?page=1#token=[redacted]");
}

TEST(RedactUrl, AHiddenValueIsHiddenWhole) {
  // ';', '?' and '/' may appear unencoded in a query value: none of them ends a
  // hidden one (only '&', or '#' where the fragment starts).
  for (const std::string& url : {with_secret("https://h/?token=a;", ";b"), with_secret("https://h/?token=a?", "?b"),
                                 with_secret("https://h/?token=a/", "/b"), with_secret("https://h/#token=a#", "#b"),
                                 with_secret("https://h/#token=a?", "")}) {
    const std::string shown = redact_url(url);
    EXPECT_FALSE(shows_secret(shown)) << url << " -> " << shown;
  }
  EXPECT_EQ(redact_url(with_secret("https://h/?token=a?", "&page=2")), "https://h/?token=[redacted]&page=2");
}

TEST(RedactUrl, NestedUrlsInOrdinaryValuesAreScannedToo) {
  EXPECT_EQ(redact_url(with_secret("https://h/login?next=/cb?token=", "&x=1")),
            "https://h/login?next=/cb?token=[redacted]&x=1");
}

TEST(RedactUrl, CredentialPathParameters) {
  EXPECT_EQ(redact_url(with_secret("/app;jsessionid=", "/page")), "/app;jsessionid=[redacted]/page");  // a relative URL
  EXPECT_EQ(redact_url(with_secret("https://h/app;jsessionid=", "/page?x=1")),
            "https://h/app;jsessionid=[redacted]/page?x=1");
  EXPECT_EQ(redact_url(with_secret("https://h/a;v=1;token=", ";w=2/b")), "https://h/a;v=1;token=[redacted]/b");
  EXPECT_EQ(redact_url("https://h/a;v=1/b"), "https://h/a;v=1/b");
}

TEST(RedactUrl, ParametersWithoutAValueStay) {
  EXPECT_EQ(redact_url("https://h/?token&key=&flag"), "https://h/?token&key=[redacted]&flag");
  EXPECT_EQ(redact_url("https://h/?&&;?#"), "https://h/?&&;?#");
}

TEST(RedactUrl, NoCombinationOfPartsShowsTheCredential) {
  // Every credential position in every combination of the other parts.
  const std::string secret(kSecret);
  const std::vector<std::string> schemes{"https://", "http:/", "HTTP:\\\\", "//", ""};
  const std::vector<std::string> userinfos{"", "user:" + secret + "@", secret + "@", "us@er:" + secret + "@"};
  const std::vector<std::string> hosts{"h", "127.0.0.1:80", "[::1]:1", "xn--d1a.example:"};
  const std::vector<std::string> paths{"", "/p", "/p;jsessionid=" + secret, "/a;x=1/b;Token=" + secret + "/c"};
  const std::vector<std::string> queries{"", "?page=2", "?token=" + secret, "?a=1&api%5Fkey=" + secret + ";x?y",
                                         "?next=/cb?code=" + secret};
  const std::vector<std::string> fragments{"", "#top", "#access_token=" + secret + "&s=1", "#/r?id_token=" + secret};
  std::size_t checked = 0;
  for (const auto& scheme : schemes)
    for (const auto& userinfo : userinfos)
      for (const auto& host : hosts)
        for (const auto& path : paths)
          for (const auto& query : queries)
            for (const auto& fragment : fragments) {
              const std::string url = scheme + userinfo + host + path + query + fragment;
              const std::string shown = redact_url(url);
              ASSERT_FALSE(shows_secret(shown)) << url << " -> " << shown;
              // What holds no credential is shown as given.
              if (url.find(secret) == std::string::npos && !(scheme.empty() && host.ends_with(":"))) {
                ASSERT_EQ(shown, url);
              }
              ++checked;
            }
  EXPECT_EQ(checked, 5u * 4 * 4 * 4 * 5 * 4);
}

TEST(RedactUrl, HostileInputNeverCrashes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (const std::string& url :
       {std::string(), std::string("%"), std::string("?%4"), std::string("http://"), std::string("http://@"),
        std::string("@@@"), std::string("[::1"), std::string("http://[::1"), std::string(1000, '@'),
        std::string(1000, '?'), all, "http://h/?" + all, "http://" + all}) {
    const std::string shown = redact_url(url);
    EXPECT_LE(shown.size(), url.size() + 2 * kRedacted.size() + 1);
  }
  EXPECT_EQ(redact_url(with_secret("http://[::1", "@host/")), "http://[redacted]@host/");
}

}  // namespace
}  // namespace abide
