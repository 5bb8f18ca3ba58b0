// A program that already configures its own libcurl easy handle hands it to
// abide, which runs it with the server's rules: it waits as long as the server
// asks, retries only what is safe to repeat, and keeps every option the
// program set (here a custom header, a user agent and a timeout).
//
//   example_own_curl_handle [URL]   (default: a local `abide mock-server --port 8080`)
//
// Prints the final status, the attempts made and the time waited; exits 0 when
// the request is done.
#include <abide/client.h>
#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

// The program's own write callback: it counts the body's bytes.
std::size_t count_bytes(char*, std::size_t size, std::size_t n, void* user) {
  *static_cast<std::size_t*>(user) += size * n;
  return size * n;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "http://127.0.0.1:8080/items/1";
  curl_global_init(CURL_GLOBAL_DEFAULT);

  // The handle as the program configures it anyway.
  CURL* handle = curl_easy_init();
  curl_slist* headers = curl_slist_append(nullptr, "X-Request-Source: own-curl-handle-example");
  std::size_t body_bytes = 0;
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "own-curl-handle-example/1");
  curl_easy_setopt(handle, CURLOPT_TIMEOUT, 30L);  // each attempt's whole transfer
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &count_bytes);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, static_cast<void*>(&body_bytes));

  // What abide needs to know: the URL and method the handle is for (abide sets
  // CURLOPT_URL), and the callbacks it hands the final answer to, and gives
  // back to the handle afterwards.
  abide::Request request;
  request.url = url;
  request.deadline = abide::system_monotonic_clock().now() + std::chrono::minutes{2};
  abide::HandleCallbacks callbacks;
  callbacks.write = &count_bytes;
  callbacks.write_data = &body_bytes;

  abide::Client client;  // system clocks, an in-memory pacer, the default planner
  const abide::RequestOutcome out = client.perform(handle, request, callbacks);

  std::printf("%s: %s, status %d, %zu attempts, waited %.1f s, %zu body bytes\n", url.c_str(),
              std::string(abide::to_string(out.kind)).c_str(), out.response ? out.response->status : 0,
              out.attempts.size(), std::chrono::duration<double>(out.waited).count(), body_bytes);
  if (!out.done()) std::printf("  %s\n", out.reason.c_str());

  curl_easy_cleanup(handle);
  curl_slist_free_all(headers);
  curl_global_cleanup();
  return out.done() ? 0 : 1;
}
