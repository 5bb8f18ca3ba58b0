#include "fetch_request.h"

#include <string_view>
#include <utility>

#include "command.h"
#include "common.h"

namespace abide::cli {
namespace fetch_request {  // private to this file (the CLI is compiled in unity batches)

Result<Header, std::string> parse_header_option(const std::string& text) {
  const auto colon = text.find(':');
  // Errors name the header only: the value may be a credential.
  if (colon == std::string::npos || colon == 0) return fail(std::string("-H: expected 'Name: value'"));
  Header h;
  h.name = text.substr(0, colon);
  std::string_view v = std::string_view(text).substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  h.value = std::string(v);
  for (char c : h.name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u >= 0x7f || std::string_view("\"(),/:;<=>?@[\\]{}").find(c) != std::string_view::npos)
      return fail(std::string("-H: invalid header name"));
  }
  for (char c : h.value)
    if (c == '\r' || c == '\n' || c == '\0') return fail("-H \"" + h.name + "\": the value contains CR, LF or NUL");
  return h;
}

}  // namespace fetch_request

Result<RequestPlan, FetchError> plan_requests(const FetchOptions& o) {
  RequestPlan plan;
  const int sources = (o.urls.empty() ? 0 : 1) + (o.urls_file.empty() ? 0 : 1) + (o.resume.empty() ? 0 : 1);
  if (sources != 1) return fail(FetchError{kExitUsage, "give exactly one of URL, --urls FILE, --resume FILE"});
  for (const std::string& h : o.headers) {
    auto parsed = fetch_request::parse_header_option(h);
    if (!parsed) return fail(FetchError{kExitUsage, parsed.error()});
    plan.headers.add(parsed->name, parsed->value);
  }
  std::string body = o.data.empty() ? std::string() : o.data.back();
  if (o.has_data && !body.empty() && body.front() == '@') {
    auto text = read_text(body.substr(1));
    if (!text) return fail(FetchError{kExitRejected, text.error().text});
    body = std::move(*text);
  }
  const std::string method = !o.method.empty() ? o.method : o.has_data ? "POST" : "GET";

  if (!o.resume.empty()) {
    auto read = read_resume(o.resume);
    if (!read) return fail(FetchError{kExitRejected, read.error()});
    plan.jobs = std::move(*read);
    plan.batch = true;
  } else {
    std::vector<std::string> urls;
    if (!o.urls_file.empty()) {
      auto list = read_url_list(o.urls_file);
      if (!list) return fail(FetchError{kExitRejected, list.error()});
      urls = std::move(*list);
      plan.batch = true;
    } else {
      urls = o.urls;
    }
    for (std::size_t i = 0; i < urls.size(); ++i) {
      FetchJob job;
      job.index = i;
      job.method = method;
      job.url = std::move(urls[i]);
      job.body = body;
      if (!o.idempotency_key.empty())
        job.idempotency_key = plan.batch ? o.idempotency_key + "-" + std::to_string(i + 1) : o.idempotency_key;
      plan.jobs.push_back(std::move(job));
    }
  }
  return plan;
}

}  // namespace abide::cli
