#!/usr/bin/env python3
"""Static checks as test cases: `make lint` (cppcheck) and
`make check-format` (clang-format with the repo's .clang-format)."""
import subprocess

from rctest import ROOT, main, test


def make(target):
    r = subprocess.run(["make", "-s", "--no-print-directory", target],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 0, "\n".join(out[-60:])


@test
def cppcheck_is_clean():
    make("lint")


@test
def clang_format_is_clean():
    make("check-format")


main()
