#!/usr/bin/env python3
"""An SDK-style API client whose base URL points at `abide proxy`.

Most SDKs take their base URL from a setting or an environment variable
(OpenAI's OPENAI_BASE_URL, say). Point it at the proxy and the SDK's own retry
logic can be turned off: the proxy paces the calls, waits as long as the server
asked, and says on each answer what it did (Abide-* fields).

    abide proxy --upstream https://api.example.com --port 8080 &
    API_BASE_URL=http://127.0.0.1:8080 python3 sdk_client.py /items/1 /items/2

Standard library only. Prints one line per call; exit 1 when any call failed.
"""
import concurrent.futures
import json
import os
import sys
import urllib.error
import urllib.request


class ApiClient:
    """The shape of a typical SDK: a base URL, a token, one method per call, no retries of its own."""

    def __init__(self, base_url=None, token=None, max_wait_s=None):
        self.base_url = (base_url or os.environ.get("API_BASE_URL", "http://127.0.0.1:8080")).rstrip("/")
        self.token = token or os.environ.get("API_TOKEN")
        self.max_wait_s = max_wait_s

    def get(self, path):
        request = urllib.request.Request(self.base_url + path)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if self.max_wait_s is not None:
            # How long this call lets the proxy hold it for pacing and retries.
            request.add_header("Abide-Max-Wait", str(self.max_wait_s))
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as answer:  # a final non-2xx answer: the proxy says why
            return answer.code, dict(answer.headers), answer.read()


def main(paths):
    client = ApiClient(max_wait_s=os.environ.get("API_MAX_WAIT"))
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for path, (status, headers, body) in zip(paths, pool.map(client.get, paths)):
            line = {
                "path": path,
                "status": status,
                "outcome": headers.get("Abide-Outcome"),
                "attempts": headers.get("Abide-Attempts"),
                "waited_s": headers.get("Abide-Waited"),
                "not_before": headers.get("Abide-Not-Before"),
                "bytes": len(body),
            }
            print(json.dumps(line))
            failed += status >= 400
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["/items/1"]))
