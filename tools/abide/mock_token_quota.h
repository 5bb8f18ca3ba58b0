// The token styles of `abide mock-server` (openai-tokens, anthropic-tokens):
// their buckets, their admission and reconciliation, and what they answer. The
// Limiter (mock_server_core.h) keeps the windows, the clients and the
// premature rule, and hands each request whose body it could read to a
// TokenQuota, under its lock.
//
// openai-tokens, as OpenAI documents its limits: a requests bucket (--limit)
// and a tokens bucket (--token-limit), each refilling continuously over the
// window. A request is admitted when the requests bucket has one whole
// request and the tokens bucket at least its admission charge, the larger of
// its max_tokens and its estimate (ceil(bytes / 4)); both are taken. Its
// answer reports prompt = the estimate and completion = a deterministic
// pseudo-random amount in [max_tokens / 4, max_tokens], and the bucket is
// then reconciled to what the answer used: the charge less the usage comes
// back (or, when the usage was larger, the difference is taken too).
//
// anthropic-tokens, as Anthropic documents its limits: a requests bucket, an
// input-tokens bucket (--token-limit) and an output-tokens bucket
// (--output-token-limit). The input (the estimate of system and messages) is
// charged at admission; max_tokens is reserved from the output bucket and
// what the answer did not use (its output is drawn as above) comes back when
// it ends.
//
// The quota fields are stated as at admission (the reservation taken, before
// the reconciliation), as the vendors' are. A limited answer states when every
// bucket will hold what this very request needs: retry-after-ms (rounded up
// to the ms) and retry-after (whole seconds, rounded up) for OpenAI,
// retry-after for Anthropic. A request whose need exceeds a bucket's capacity
// can never be admitted: its 429 says so and states no wait.
#pragma once

#include <cstdint>

#include "mock_bucket.h"
#include "mock_request_body.h"
#include "mock_server_core.h"

namespace abide::mock {

class TokenQuota {
 public:
  // o.style is a token style; the options passed validate(). Buckets full at `now`.
  TokenQuota(const LimiterOptions& o, WallTime now);

  // Every bucket full again.
  void reset(WallTime now);

  // Decides request `r` at `now`: the status and outcome (a.outcome kFailed
  // on entry: a random failure already drawn, which uses no quota), the
  // quota fields, the wait signal and a.permitted, the body. `serial` (the
  // requests counted so far) seeds the answer's output tokens and names it.
  // Returns what it admitted and charged, for the statistics.
  TokenCounts decide(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a);

  // The answer's output tokens: deterministic in (seed, serial), in
  // [max_tokens / 4, max_tokens].
  static std::uint64_t output_tokens(std::uint64_t seed, std::uint64_t serial, std::uint64_t max_tokens);

 private:
  TokenCounts decide_openai(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a);
  TokenCounts decide_anthropic(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a);

  void openai_fields(HeaderList& h) const;
  void openai_limited(WallTime now, const TokenRequest& r, std::uint64_t charge, Answer& a) const;

  void anthropic_fields(WallTime now, HeaderList& h) const;
  void anthropic_limited(WallTime now, const TokenRequest& r, Answer& a) const;

  // "minute" for a window of 60 s, else the window as a Go duration ("1s").
  std::string window_words() const;

  LimiterOptions opts_;
  Bucket requests_;
  Bucket tokens_;  // openai-tokens' tokens; anthropic-tokens' input tokens
  Bucket output_;  // anthropic-tokens' output tokens
};

}  // namespace abide::mock
