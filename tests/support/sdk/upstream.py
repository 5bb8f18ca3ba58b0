#!/usr/bin/python3
"""A rate-limited API on 127.0.0.1 that answers as one vendor documents, for
the tests of `abide proxy` with real SDKs. Standard library only.

  upstream.py --style openai|anthropic|github|stripe|ietf [--limit N] [--window S]
              [--surprise K:S]... [--items N] [--limited-status 403|429] [--grace S] [--port P]

Quota, as each vendor documents it: openai and anthropic a bucket of LIMIT
requests, one back every WINDOW/LIMIT seconds, whose reset fields say when it is
full again; the others LIMIT requests per window of WINDOW seconds, from the
first request after the last window ended to a whole second (so that a reset
in Unix seconds is exact). --surprise K:S answers the K-th API request as
limited, as when another program spends the same key's quota: a limited answer
the caller could not foresee. It empties a bucket for S seconds, and spends
the rest of a window. Every stated wait is rounded up.

Premature: a request arriving before the latest time the upstream stated as
permitted: a limited answer's Retry-After and retry-after-ms as stated (whole
seconds rounded up are a later time, and a caller must still wait for it), and
its quota fields; an accepted answer's fields when they say nothing remains
(the window's end, or the bucket's next request, which the fields round up).
A statement applies to requests that arrive GRACE seconds after it was sent
(requests in flight then did not know it), and at once on the connection it
was sent on.

First stdout line: "listening on 127.0.0.1:PORT". GET /__stats answers the
counts and one entry per API request; it is the test's, never an API path.

Paths, by style (others: 404 in the vendor's dialect):
  openai     POST /v1/chat/completions  (JSON, or SSE when the body has "stream": true)
  anthropic  POST /v1/messages          (same)
  github     GET /repos/O/R, GET /user, POST /repos/O/R/issues,
             GET /repos/O/R/issues?page=&per_page= (ITEMS issues; Link with
             absolute URLs at this server's own address, as GitHub's point at itself)
  stripe     POST /v1/customers         (form body)
  ietf       GET /items/N               (IETF RateLimit fields, problem+json)
"""
import argparse
import datetime
import json
import math
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STYLES = ("openai", "anthropic", "github", "stripe", "ietf")


def ceil_s(x):
    return max(0, math.ceil(x - 1e-9))


def ceil_ms(x):
    return max(0, math.ceil(x * 1000 - 1e-6))


def go_duration(seconds):
    """OpenAI's reset fields: a Go duration (734ms, 1.5s, 1m30s)."""
    ms = ceil_ms(seconds)
    if ms < 1000:
        return f"{ms}ms"
    m, rest = divmod(ms, 60000)
    s = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{m}m{s}" if m else s


def rfc3339(unix):
    return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FixedWindow:
    """GitHub's, Stripe's and the IETF fields' quota: LIMIT requests per window;
    a window starts with the first request after the last one ended, as
    GitHub's do, and ends on a whole second, so that a reset in Unix seconds
    is exact. Its reset never moves. A surprise spends the rest of the window."""

    def __init__(self, limit, window):
        self.limit, self.window = limit, window
        self.win_end, self.used = 0.0, 0

    def take(self, t, surprise):
        """(accepted, remaining, reset: when the quota is whole again, next: when one request is)."""
        if t >= self.win_end:
            self.win_end = math.ceil(t + self.window)
            self.used = 0
        if surprise is not None:
            self.used = self.limit
        accepted = self.used < self.limit
        if accepted:
            self.used += 1
        return accepted, self.limit - self.used, self.win_end, self.win_end


class Bucket:
    """OpenAI's and Anthropic's quota, as they document it: a bucket of LIMIT
    requests, one back every WINDOW/LIMIT seconds, starting full; the reset
    fields say when it is full again. A surprise empties it for SECONDS."""

    def __init__(self, limit, window):
        self.limit, self.interval = limit, window / limit
        self.level, self.at = float(limit), None

    def take(self, t, surprise):
        if self.at is not None:
            self.level = min(self.limit, self.level + (t - self.at) / self.interval)
        self.at = t
        if surprise is not None:
            self.level = 1 - surprise / self.interval
        accepted = self.level >= 1
        if accepted:
            self.level -= 1
        full = t + (self.limit - self.level) * self.interval
        nxt = t + max(0.0, 1 - self.level) * self.interval
        return accepted, max(0, math.floor(self.level)), full, nxt


class Limiter:
    """The quota, surprises, and the premature count. Thread-safe."""

    def __init__(self, quota, surprises, grace):
        self.quota, self.surprises, self.grace = quota, surprises, grace
        self.lock = threading.Lock()
        self.told = []  # (sent, permitted, connection)
        self.log = []
        self.counts = {"requests": 0, "accepted": 0, "limited": 0, "premature": 0}

    def premature(self, t, conn):
        self.told = [x for x in self.told if x[1] > t - 5]
        return any(t < permitted and (sent + self.grace <= t or c == conn) for sent, permitted, c in self.told)

    def decide(self, t, conn):
        """What this request gets: (accepted, remaining, reset, next, premature, n)."""
        with self.lock:
            self.counts["requests"] += 1
            n = self.counts["requests"]
            early = self.premature(t, conn)
            if early:
                self.counts["premature"] += 1
            accepted, remaining, reset, nxt = self.quota.take(t, self.surprises.get(n))
            self.counts["accepted" if accepted else "limited"] += 1
            return accepted, remaining, reset, nxt, early, n

    def stated(self, sent, permitted, conn):
        with self.lock:
            self.told.append((sent, permitted, conn))

    def record(self, entry):
        with self.lock:
            self.log.append(entry)

    def stats(self):
        with self.lock:
            return dict(self.counts, log=list(self.log))


class Vendor:
    """Fields, bodies and paths of one style."""

    def __init__(self, style, limit, window, items, limited_status):
        self.style, self.limit, self.window, self.items = style, limit, window, items
        self.limited_status = limited_status

    # -- quota fields: (headers, the instant they state as permitted or None).
    # reset: when the quota is whole again; nxt: when one request is back --
    def quota_fields(self, now, remaining, reset, nxt):
        h, left = [], reset - now
        # What the fields state is the instant they round up: a window's end (a
        # delay in whole seconds is its ceiling), a bucket's next request (its
        # reset is a full refill, and read as documented the next unit is back
        # no sooner than nxt). A Retry-After is taken as stated (limited()).
        permitted = (nxt if self.style in ("openai", "anthropic") else reset) if remaining == 0 else None
        if self.style == "openai":
            h += [("x-ratelimit-limit-requests", str(self.limit)),
                  ("x-ratelimit-remaining-requests", str(remaining)),
                  ("x-ratelimit-reset-requests", go_duration(left)),
                  ("x-ratelimit-limit-tokens", "1000000"),
                  ("x-ratelimit-remaining-tokens", "999000"),
                  ("x-ratelimit-reset-tokens", "60ms")]
        elif self.style == "anthropic":
            for kind, limit, rem in (("requests", self.limit, remaining), ("tokens", 1000000, 999000),
                                     ("input-tokens", 800000, 799000), ("output-tokens", 200000, 199000)):
                h += [(f"anthropic-ratelimit-{kind}-limit", str(limit)),
                      (f"anthropic-ratelimit-{kind}-remaining", str(rem)),
                      (f"anthropic-ratelimit-{kind}-reset", rfc3339(math.ceil(reset if kind == "requests" else now + 60)))]
        elif self.style == "github":
            h += [("x-ratelimit-limit", str(self.limit)), ("x-ratelimit-remaining", str(remaining)),
                  ("x-ratelimit-reset", str(int(reset))), ("x-ratelimit-used", str(self.limit - remaining)),
                  ("x-ratelimit-resource", "core")]
        elif self.style == "ietf":
            t = ceil_s(left)
            h += [("RateLimit-Policy", f'"default";q={self.limit};w={math.ceil(self.window)}'),
                  ("RateLimit", f'"default";r={remaining};t={t}')]
        else:  # stripe states no quota
            permitted = None
        return h, permitted

    # -- the limited answer: (status, headers, body, the instant its wait fields state) --
    def limited(self, now, nxt):
        left = nxt - now
        secs = ceil_s(left)
        permitted = now + secs
        h = []
        if self.style == "openai":
            h += [("retry-after-ms", str(ceil_ms(left))), ("retry-after", str(secs))]
            body = {"error": {"message": f"Rate limit reached for gpt-4o-mini in organization org-test on requests "
                                         f"per min (RPM): Limit {self.limit}, Used {self.limit}, Requested 1. "
                                         f"Please try again in {go_duration(left)}.",
                              "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
            return 429, h, body, permitted
        if self.style == "anthropic":
            h += [("retry-after", str(secs))]
            body = {"type": "error", "error": {"type": "rate_limit_error",
                                               "message": "This request would exceed the rate limit for your "
                                                          "organization of requests per minute."},
                    "request_id": "req_limited"}
            return 429, h, body, permitted
        if self.style == "github":  # a primary limit: 403 or 429, remaining 0, the reset; no Retry-After
            body = {"message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
                    "status": str(self.limited_status)}
            return self.limited_status, h, body, nxt
        if self.style == "stripe":  # Stripe's SDKs read Stripe-Should-Retry, the Python one Retry-After
            h += [("Retry-After", str(secs)), ("Stripe-Should-Retry", "true"),
                  ("Stripe-Rate-Limited-Reason", "global-rate")]
            body = {"error": {"code": "rate_limit", "doc_url": "https://stripe.com/docs/error-codes/rate-limit",
                              "message": "Request rate limit exceeded. Learn more about rate limits here "
                                         "https://stripe.com/docs/rate-limits.",
                              "type": "invalid_request_error"}}
            return 429, h, body, permitted
        h += [("Retry-After", str(secs))]
        body = {"type": "about:blank", "title": "Too Many Requests", "status": 429,
                "detail": f"Quota exhausted; retry in {secs} s."}
        return 429, h, body, permitted

    def content_type(self, status):
        if self.style == "ietf" and status >= 400:
            return "application/problem+json"
        return "application/json; charset=utf-8" if self.style == "github" else "application/json"

    def not_found(self):
        if self.style == "anthropic":
            return {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
        if self.style in ("openai", "stripe"):
            return {"error": {"message": "Unknown request URL", "type": "invalid_request_error"}}
        return {"message": "Not Found"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "upstream"

    def log_message(self, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.handle_api()

    def do_POST(self):
        self.handle_api()

    def send(self, status, headers, body=None, stream=None):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if stream is None:
            data = json.dumps(body).encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, piece in enumerate(stream):
            if i:
                time.sleep(0.02)  # so that the events arrive one by one
            data = piece.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def handle_api(self):
        arrival = time.time()
        srv = self.server
        url = urllib.parse.urlsplit(self.path)
        body = self.read_body()
        if url.path == "/__stats":
            self.send(200, [("Content-Type", "application/json")], srv.limiter.stats())
            return
        conn = f"{self.client_address[0]}:{self.client_address[1]}"
        accepted, remaining, reset, nxt, early, n = srv.limiter.decide(arrival, conn)
        v = srv.vendor
        now = time.time()
        headers, permitted = v.quota_fields(now, remaining, reset, nxt)
        entry = {"n": n, "t": round(arrival, 4), "method": self.command, "path": self.path,
                 "premature": early, "idempotency_key": self.headers.get("Idempotency-Key") is not None,
                 "abide_fields": sorted(k for k in self.headers.keys() if k.lower().startswith("abide-"))}
        if not accepted:
            status, extra, err, stated = v.limited(now, nxt)
            permitted = max(permitted or 0, stated)
            headers += extra + [("Content-Type", v.content_type(status))]
            srv.limiter.stated(now, permitted, conn)
            entry["status"] = status
            srv.limiter.record(entry)
            self.send(status, headers, err)
            return
        if permitted is not None:
            srv.limiter.stated(now, permitted, conn)
        status, extra, answer, stream = self.route(url, body, n)
        entry["status"] = status
        srv.limiter.record(entry)
        content_type = "text/event-stream; charset=utf-8" if stream else v.content_type(status)
        self.send(status, headers + extra + [("Content-Type", content_type)], answer, stream)

    # -- the API itself: (status, headers, JSON body, SSE events or None) --
    def route(self, url, body, n):
        style = self.server.vendor.style
        path, query = url.path, urllib.parse.parse_qs(url.query)
        if style == "openai" and self.command == "POST" and path == "/v1/chat/completions":
            return self.openai(json.loads(body or b"{}"), n)
        if style == "anthropic" and self.command == "POST" and path == "/v1/messages":
            return self.anthropic(json.loads(body or b"{}"), n)
        if style == "github":
            return self.github(path, query, body, n)
        if style == "stripe" and self.command == "POST" and path == "/v1/customers":
            form = urllib.parse.parse_qs(body.decode())
            return 200, [("Request-Id", f"req_{n}")], {
                "id": f"cus_{n}", "object": "customer", "email": form.get("email", [None])[0],
                "livemode": False}, None
        if style == "ietf" and self.command == "GET" and path.startswith("/items/"):
            return 200, [], {"id": path.rsplit("/", 1)[1], "n": n}, None
        return 404, [], self.server.vendor.not_found(), None

    WORDS = ["Hello", " from", " the", " upstream", "."]

    def openai(self, req, n):
        rid = [("x-request-id", f"req_{n}"), ("openai-processing-ms", "5")]
        base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": req.get("model", "gpt-4o-mini")}
        if not req.get("stream"):
            return 200, rid, dict(base, object="chat.completion", choices=[
                {"index": 0, "message": {"role": "assistant", "content": "".join(self.WORDS)},
                 "finish_reason": "stop"}], usage={"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}), None

        def chunk(delta, finish=None):
            c = dict(base, object="chat.completion.chunk",
                     choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            return f"data: {json.dumps(c)}\n\n"
        events = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": w}) for w in self.WORDS]
        return 200, rid, None, events + [chunk({}, "stop"), "data: [DONE]\n\n"]

    def anthropic(self, req, n):
        rid = [("request-id", f"req_{n}")]
        msg = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": req.get("model", "test-model"),
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
        if not req.get("stream"):
            return 200, rid, dict(msg, content=[{"type": "text", "text": "".join(self.WORDS)}],
                                  stop_reason="end_turn", usage={"input_tokens": 5, "output_tokens": 5}), None

        def event(name, data):
            return f"event: {name}\ndata: {json.dumps(dict(data, type=name))}\n\n"
        events = [event("message_start", {"message": dict(msg, content=[])}),
                  event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
        events += [event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": w}})
                   for w in self.WORDS]
        events += [event("content_block_stop", {"index": 0}),
                   event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                           "usage": {"output_tokens": 5}}),
                   event("message_stop", {})]
        return 200, rid, None, events

    def github(self, path, query, body, n):
        parts = path.strip("/").split("/")
        me = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.command == "GET" and parts == ["user"]:
            return 200, [], {"login": "octocat", "id": 1, "type": "User", "url": f"{me}/users/octocat"}, None
        if len(parts) < 3 or parts[0] != "repos":
            return 404, [], self.server.vendor.not_found(), None
        owner, repo = parts[1], parts[2]
        full = f"{owner}/{repo}"
        repo_json = {"id": 7, "name": repo, "full_name": full, "private": False,
                     "owner": {"login": owner, "id": 1, "type": "User"}, "url": f"{me}/repos/{full}",
                     "issues_url": f"{me}/repos/{full}/issues{{/number}}", "open_issues_count": self.server.vendor.items}
        if self.command == "GET" and len(parts) == 3:
            return 200, [], repo_json, None
        if parts[3:] != ["issues"]:
            return 404, [], self.server.vendor.not_found(), None

        def issue(i, title):
            return {"id": 1000 + i, "number": i, "title": title, "state": "open", "url": f"{me}/repos/{full}/issues/{i}",
                    "user": {"login": "octocat", "id": 1, "type": "User"}, "labels": [], "comments": 0}
        if self.command == "POST":
            return 201, [("Location", f"{me}/repos/{full}/issues/{n}")], issue(n, json.loads(body)["title"]), None
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        total = self.server.vendor.items
        last = max(1, math.ceil(total / per_page))
        first = (page - 1) * per_page + 1
        items = [issue(i, f"issue {i}") for i in range(first, min(total, page * per_page) + 1)]

        def link(p, rel):
            return f'<{me}{path}?per_page={per_page}&page={p}>; rel="{rel}"'
        rels = []
        if page > 1:
            rels += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            rels += [link(page + 1, "next"), link(last, "last")]
        return 200, [("Link", ", ".join(rels))] if rels else [], items, None


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a caller that hung up is no error
            super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=STYLES, required=True)
    p.add_argument("--limit", type=int, default=3)
    p.add_argument("--window", type=float, default=1, help="seconds")
    p.add_argument("--surprise", action="append", default=[], help="K:SECONDS")
    p.add_argument("--items", type=int, default=10, help="issues in the github style's list")
    p.add_argument("--limited-status", type=int, choices=(403, 429), default=403,
                   help="the github style's limited status (GitHub documents both)")
    # Wide enough for a request sent before the statement to arrive late on a
    # loaded machine; an early request on the statement's own connection counts at once.
    p.add_argument("--grace", type=float, default=0.25, help="seconds")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    surprises = {int(k): float(s) for k, s in (x.split(":") for x in a.surprise)}
    server = Server(("127.0.0.1", a.port), Handler)
    quota = (Bucket if a.style in ("openai", "anthropic") else FixedWindow)(a.limit, a.window)
    server.limiter = Limiter(quota, surprises, a.grace)
    server.vendor = Vendor(a.style, a.limit, a.window, a.items, a.limited_status)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
