#!/usr/bin/env python3
"""Run every test suite and print one summary line.

A suite is an executable that prints TAP: the C unit tests in
$OUTPUT/tests/test_*, the same built with ASan+UBSan in
$OUTPUT/asan/tests/test_* (named asan/test_*), and the Python suites tests/integration/test_*.py and
comfyui/tests/test_*.py. A suite that exits non-zero without reporting a
failing case counts as one failure, so a crash is never lost.

Usage: tests/run.py [SUBSTRING]   run only suites whose name contains it
The last line is "N passed, N failed, N skipped".
"""
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, os.environ.get("OUTPUT", "build"))
PYTHON = os.environ.get("PYTHON", sys.executable)
TAP = re.compile(r"^(not ok|ok)\b[^-]*-?\s*(.*?)(\s+#\s*SKIP\b.*)?$")
SUITE_TIMEOUT = int(os.environ.get("RAMCACHE_SUITE_TIMEOUT", "900"))


def suites():
    tdir = os.path.join(OUTPUT, "tests")
    if os.path.isdir(tdir):
        for name in sorted(os.listdir(tdir)):
            path = os.path.join(tdir, name)
            if name.startswith("test_") and os.access(path, os.X_OK):
                yield name, [path]
    # the same C tests built with ASan+UBSan (make hardening)
    adir = os.path.join(OUTPUT, "asan", "tests")
    if os.path.isdir(adir):
        for name in sorted(os.listdir(adir)):
            path = os.path.join(adir, name)
            if name.startswith("test_") and os.access(path, os.X_OK):
                yield f"asan/{name}", [path]
    for sub in ("tests/integration", "comfyui/tests"):
        d = os.path.join(ROOT, sub)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith("test_") and name.endswith(".py"):
                yield f"{sub}/{name}", [PYTHON, os.path.join(d, name)]


def run_suite(name, argv):
    passed = failed = skipped = 0
    start = time.monotonic()
    env = dict(os.environ, OUTPUT=OUTPUT, RAMCACHE_ROOT=ROOT)
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT,
                              text=True, errors="replace")
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    for line in out.splitlines():
        m = TAP.match(line)
        if not m:
            if line.startswith("#") or rc != 0:
                print(f"    {line}")
            continue
        if m.group(1) == "not ok":
            failed += 1
            print(f"FAIL {name}: {m.group(2)}")
        elif m.group(3):
            skipped += 1
            print(f"SKIP {name}: {m.group(2)} {m.group(3).strip()}")
        else:
            passed += 1
            print(f"ok   {name}: {m.group(2)}")
    if rc != 0 and failed == 0:
        failed += 1
        print(f"FAIL {name}: suite exited with {rc}")
    print(f"     {name}: {time.monotonic() - start:.1f}s", flush=True)
    return passed, failed, skipped


def main():
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    total = [0, 0, 0]
    for name, argv in suites():
        if want and want not in name:
            continue
        for i, n in enumerate(run_suite(name, argv)):
            total[i] += n
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
