#!/usr/bin/python3
"""python3-requests or python3-httpx pointed at abide proxy: GET BASE/items/I.

  http_client.py --lib requests|retry|retry-no-wait|httpx --base URL [--calls N]
                 [--parallel P] [--header "Name: value"]...

requests: a Session, no retries. retry: a Session whose adapter retries 429
and 503 with urllib3's Retry, sleeping for Retry-After (its default).
retry-no-wait: Retry for 502, 503 and 504 with respect_retry_after_header off,
so that a 429 (or 503) with Retry-After reaches the caller instead of a sleep:
urllib3 retries a 413, 429 or 503 carrying Retry-After whatever
status_forcelist says unless that is off. httpx: a Client with its defaults
(a 5 s timeout, no retries). A status of 400 or more is an error carrying the
answer's fields. Output: sdk_common; each call adds "status".
"""
import argparse

import sdk_common  # first: Debian's packages

import httpx  # noqa: E402
import requests  # noqa: E402
from requests.adapters import HTTPAdapter  # noqa: E402
from urllib3.util.retry import Retry  # noqa: E402


class StatusError(Exception):
    def __init__(self, status, headers):
        super().__init__(f"HTTP {status}")
        self.status, self.headers = status, headers


def describe(e):
    if isinstance(e, StatusError):
        return sdk_common.describe_error(e, e.status, e.headers)
    return sdk_common.describe_error(e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", choices=("requests", "retry", "retry-no-wait", "httpx"), required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("-H", "--header", action="append", default=[])
    a = p.parse_args()
    headers = {k.strip(): v.strip() for k, _, v in (h.partition(":") for h in a.header)}

    if a.lib == "httpx":
        client = httpx.Client(headers=headers, trust_env=False,
                              event_hooks={"request": [lambda r: sdk_common.record(r.method, str(r.url))]})
        get = client.get
    else:
        sdk_common.record_requests()
        session = requests.Session()
        session.trust_env = False
        session.headers.update(headers)
        if a.lib == "retry":
            retry = Retry(total=3, backoff_factor=0.2, status_forcelist=(429, 503), raise_on_status=False)
        elif a.lib == "retry-no-wait":
            retry = Retry(total=3, backoff_factor=0.2, status_forcelist=(502, 503, 504),
                          respect_retry_after_header=False, raise_on_status=False)
        else:
            retry = None
        if retry is not None:
            session.mount("http://", HTTPAdapter(max_retries=retry))
        get = session.get

    def one(i):
        r = get(f"{a.base}/items/{i}")
        if r.status_code >= 400:
            raise StatusError(r.status_code, r.headers)
        return {"status": r.status_code}

    sdk_common.run_calls(a.calls, a.parallel, lambda i: a.lib, one, describe)


if __name__ == "__main__":
    main()
