#!/usr/bin/python3
"""Puts the pinned Node SDKs and the Node clients of the SDK tests into DEST.

  install_node.py DEST

Copies tests/support/sdk/node (package.json, package-lock.json, *.mjs) to DEST
and runs `npm ci` there when the lock file differs from the one last installed
(DEST/.installed holds its hash): the first test run downloads, the next ones
only copy. npm's cache is DEST/.npm-cache, so nothing is written to the home
directory. Tests run side by side: an exclusive lock on DEST/.lock makes the
others wait for one install. Exit 1 with npm's own message when it fails.
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: install_node.py DEST")
    dest = sys.argv[1]
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in os.listdir(HERE):
            if name.endswith((".json", ".mjs")):
                shutil.copyfile(os.path.join(HERE, name), os.path.join(dest, name))
        with open(os.path.join(HERE, "package-lock.json"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        stamp = os.path.join(dest, ".installed")
        if os.path.exists(stamp) and open(stamp).read().strip() == digest:
            return
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("npm is not on PATH (a test dependency: scripts/deps.sh test)")
        print(f"sdk tests: npm ci in {dest}", file=sys.stderr, flush=True)
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error",
                            "--cache", os.path.join(dest, ".npm-cache")], cwd=dest)
        if r.returncode != 0:
            sys.exit(f"npm ci failed in {dest} (exit {r.returncode})")
        with open(stamp, "w") as f:
            f.write(digest + "\n")


if __name__ == "__main__":
    main()
