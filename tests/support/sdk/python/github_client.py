#!/usr/bin/python3
"""python3-github (PyGithub) pointed at abide proxy.

  github_client.py --base URL [--steps get,list,user,...] [--per-page N] [--timeout S]

Steps: get (get_repo), list (every issue of the repository: PyGithub follows
the Link header page by page, and refuses a page whose URL is not on its base
URL's host), user (the authenticated user). Output: sdk_common; "items" for a
list, "name" for get and user.
"""
import argparse

import sdk_common  # first: Debian's packages

import github  # noqa: E402


def describe(e):
    if isinstance(e, github.GithubException):
        return sdk_common.describe_error(e, e.status, e.headers)
    return sdk_common.describe_error(e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--steps", default="get")
    p.add_argument("--per-page", type=int, default=2)
    p.add_argument("--timeout", type=int, default=15)
    a = p.parse_args()
    sdk_common.record_requests()
    g = github.Github(login_or_token="ghp_test_not_a_token", base_url=a.base, per_page=a.per_page,
                      timeout=a.timeout)
    steps = a.steps.split(",")

    def one(i):
        step = steps[i]
        if step == "get":
            return {"name": g.get_repo("octo/tests").full_name}
        if step == "list":
            numbers = [issue.number for issue in g.get_repo("octo/tests", lazy=True).get_issues()]
            return {"items": len(numbers), "numbers": numbers}
        if step == "user":
            return {"name": g.get_user().login}
        raise ValueError(f"unknown step {step}")

    sdk_common.run_calls(len(steps), 1, lambda i: steps[i], one, describe)


if __name__ == "__main__":
    main()
