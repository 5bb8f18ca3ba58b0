#!/usr/bin/python3
"""python3-stripe pointed at abide proxy: Customer.create, a POST. Telemetry off.

  stripe_client.py --base URL [--calls N] [--parallel P] [--max-retries R]

--max-retries: stripe.max_network_retries (the SDK's default is 0: no retry,
no Idempotency-Key; with retries it sends one). Output: sdk_common; each
successful call adds "id".
"""
import argparse

import sdk_common  # first: Debian's packages

import stripe  # noqa: E402


def describe(e):
    if isinstance(e, stripe.error.StripeError):
        return sdk_common.describe_error(e, e.http_status, e.headers)
    return sdk_common.describe_error(e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--max-retries", type=int, default=None)
    a = p.parse_args()
    sdk_common.record_requests()
    stripe.api_key = "sk_test_not_a_key"
    stripe.api_base = a.base
    stripe.enable_telemetry = False
    stripe.default_http_client = stripe.http_client.RequestsClient()
    if a.max_retries is not None:
        stripe.max_network_retries = a.max_retries

    def one(i):
        return {"id": stripe.Customer.create(email=f"c{i}@example.test").id}

    sdk_common.run_calls(a.calls, a.parallel, lambda i: "Customer.create", one, describe)


if __name__ == "__main__":
    main()
