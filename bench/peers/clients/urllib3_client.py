#!/usr/bin/python3
"""Python urllib3 as people use it for a batch: one PoolManager, a thread pool of
N workers, and Retry(respect_retry_after_header=True). urllib3 sleeps Retry-After
(seconds or HTTP-date) on 413/429/503 and otherwise backs off exponentially
(backoff_factor 0.5: 0 s, 1 s, 2 s, ...). Worker i sends X-Client-Id: ID-wi.

  urllib3_client.py --urls FILE --jobs N --client-id ID --retries R --summary OUT.json
"""
import argparse
import collections
import concurrent.futures
import itertools
import json
import threading
import time

import urllib3
from urllib3.util.retry import Retry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--client-id", default="urllib3")
    ap.add_argument("--retries", type=int, default=10)
    ap.add_argument("--summary", default="/dev/stdout")
    a = ap.parse_args()
    with open(a.urls) as f:
        urls = [line.strip() for line in f if line.strip()]

    retry = Retry(total=a.retries, backoff_factor=0.5, status_forcelist=[429, 500, 502, 503, 504],
                  respect_retry_after_header=True, raise_on_status=False)
    http = urllib3.PoolManager(num_pools=4, maxsize=a.jobs, block=True, retries=retry,
                               timeout=urllib3.Timeout(connect=5, read=30))
    local = threading.local()
    worker_ids = itertools.count()

    def get(url):
        if not hasattr(local, "header"):
            local.header = {"X-Client-Id": f"{a.client_id}-w{next(worker_ids)}"}
        try:
            r = http.request("GET", url, headers=local.header, preload_content=True)
            return str(r.status)
        except urllib3.exceptions.HTTPError:
            return "error"

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        finals = collections.Counter(pool.map(get, urls))
    elapsed = time.monotonic() - start
    done = finals.get("200", 0)
    summary = {"client": "urllib3", "version": urllib3.__version__, "requests": len(urls), "done": done,
               "failed": sum(finals.values()) - done, "final_status": dict(finals), "elapsed_s": round(elapsed, 3)}
    with open(a.summary, "w") as f:
        json.dump(summary, f)
        f.write("\n")


if __name__ == "__main__":
    main()
