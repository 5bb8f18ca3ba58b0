#!/usr/bin/env python3
"""A caller of `abide proxy` for its tests: Python's http.client, no retries.

Sends COUNT requests (METHOD, headers, body) from PARALLEL threads, each on its
own connection (kept alive across its requests with --keep-alive, else a new
connection per request), and prints one JSON line per answer:
  {"i", "status", "outcome", "attempts", "waited", "not_before",
   "retry_after", "body_len", "start_s", "start_unix", "head_s", "end_s"}
(+ "body" with --print-body, + "chunks": [[t_s, text], ...] with --chunks;
times in seconds since the program started; "error" instead of a status when
the exchange failed). Standard library only.
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

T0 = time.monotonic()


def now():
    return round(time.monotonic() - T0, 4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--method", default="GET")
    p.add_argument("-H", "--header", action="append", default=[], help="Name: value")
    p.add_argument("--data", default=None)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--keep-alive", action="store_true")
    p.add_argument("--print-body", action="store_true")
    p.add_argument("--chunks", action="store_true", help="record when each piece of the body arrived")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()

    u = urllib.parse.urlsplit(a.url)
    target = (u.path or "/") + ("?" + u.query if u.query else "")
    headers = {}
    for h in a.header:
        name, _, value = h.partition(":")
        headers[name.strip()] = value.strip()
    body = a.data.encode() if a.data is not None else None

    lock = threading.Lock()
    next_index = [0]

    def take():
        with lock:
            if next_index[0] >= a.count:
                return None
            next_index[0] += 1
            return next_index[0] - 1

    def emit(line):
        with lock:
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    def worker():
        conn = None
        while True:
            i = take()
            if i is None:
                break
            line = {"i": i, "start_s": now(), "start_unix": time.time()}
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=a.timeout)
                conn.request(a.method, target, body=body, headers=headers)
                r = conn.getresponse()
                line["head_s"] = now()
                line["status"] = r.status
                for key, field in (("outcome", "Abide-Outcome"), ("attempts", "Abide-Attempts"),
                                   ("waited", "Abide-Waited"), ("not_before", "Abide-Not-Before"),
                                   ("retry_after", "Retry-After")):
                    line[key] = r.getheader(field)
                data = b""
                chunks = []
                while True:
                    piece = r.read1(65536) if a.chunks else r.read()
                    if not piece:
                        break
                    if a.chunks:
                        chunks.append([now(), piece.decode("utf-8", "replace")])
                    data += piece
                    if not a.chunks:
                        break
                line["end_s"] = now()
                line["body_len"] = len(data)
                if a.print_body:
                    line["body"] = data.decode("utf-8", "replace")
                if a.chunks:
                    line["chunks"] = chunks
                if not a.keep_alive or r.will_close:
                    conn.close()
                    conn = None
            except Exception as e:  # a failed exchange is a result to report
                line["error"] = type(e).__name__ + ": " + str(e)
                line["end_s"] = now()
                if conn is not None:
                    conn.close()
                    conn = None
            emit(line)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(max(1, a.parallel))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
