// Built against an installed abide with find_package(abide COMPONENTS curl) or
// pkg-config's abide-curl: the client header and library come with that part.
#include <abide/client.h>

#include <cstdio>

int main() {
  // Only what needs no network: a client over libcurl can be made and dropped.
  const abide::Client client;
  std::printf("consumer_curl: a client, up to %lld attempts per request\n",
              static_cast<long long>(client.config().max_attempts));
  return 0;
}
