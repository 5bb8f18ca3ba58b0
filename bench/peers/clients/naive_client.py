#!/usr/bin/python3
"""The floor: a naive client that ignores every header. N worker threads, one
keep-alive connection each; any answer other than 2xx is retried after
0.5 s x 2^(n-1) (capped at 8 s, no jitter), up to R retries. Worker i sends
X-Client-Id: ID-wi. Python's standard library only.

  naive_client.py --urls FILE --jobs N --client-id ID --retries R --summary OUT.json
"""
import argparse
import collections
import http.client
import json
import queue
import threading
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--client-id", default="naive")
    ap.add_argument("--retries", type=int, default=10)
    ap.add_argument("--summary", default="/dev/stdout")
    a = ap.parse_args()
    with open(a.urls) as f:
        urls = [line.strip() for line in f if line.strip()]
    todo = queue.Queue()
    for u in urls:
        todo.put(u)
    finals = collections.Counter()
    lock = threading.Lock()

    def worker(w):
        headers = {"X-Client-Id": f"{a.client_id}-w{w}"}
        conn = None
        while True:
            try:
                url = todo.get_nowait()
            except queue.Empty:
                break
            u = urllib.parse.urlsplit(url)
            target = u.path + ("?" + u.query if u.query else "")
            final = "error"
            for attempt in range(a.retries + 1):
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                    conn.request("GET", target, headers=headers)
                    r = conn.getresponse()
                    r.read()
                    final = str(r.status)
                    if 200 <= r.status < 300:
                        break
                except (OSError, http.client.HTTPException):
                    final = "error"
                    if conn is not None:
                        conn.close()
                    conn = None
                if attempt < a.retries:
                    time.sleep(min(8.0, 0.5 * 2 ** attempt))
            with lock:
                finals[final] += 1
        if conn is not None:
            conn.close()

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    done = finals.get("200", 0)
    summary = {"client": "naive", "requests": len(urls), "done": done, "failed": sum(finals.values()) - done,
               "final_status": dict(finals), "elapsed_s": round(elapsed, 3)}
    with open(a.summary, "w") as f:
        json.dump(summary, f)
        f.write("\n")


if __name__ == "__main__":
    main()
