#!/usr/bin/env python3
"""Run every test suite and print one summary line.

A suite is an executable that prints TAP: the C unit tests in
$OUTPUT/tests/test_*, the same built with ASan+UBSan in
$OUTPUT/asan/tests/test_* (named asan/test_*), and the Python suites tests/integration/test_*.py,
comfyui/tests/test_*.py and python/tests/test_*.py. A suite that exits non-zero without reporting a
failing case counts as one failure, so a crash is never lost.

The suites that need a real kernel (VM_SUITES) run twice: on this machine's
kernel, and in a VM booting Debian 12's packaged 6.1 kernel with cgroup v2
(tests/vm/run.sh), named vm-6.1/<suite>. Each suite's last line says which
kernel and cgroup version it ran on.

The suites that boot or package a system of their own (HOST_SUITES: the
container engines, and the systemd unit under systemd as PID 1) are left out
with RAMCACHE_FRESH=1 (make test-fresh): they build their roots from the
host's debootstrap cache, install nothing the fresh root could lack, and
have run on this kernel already.

Usage: tests/run.py [--no-vm | --kernels] [SUBSTRING]
  SUBSTRING   run only suites whose name contains it
  --no-vm     leave out the VM suites (also RAMCACHE_NO_VM=1)
  --kernels   only the VM_SUITES, on this kernel and in the VM (make vmtest)
The last line is "N passed, N failed, N skipped".
"""
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, os.environ.get("OUTPUT", "build"))
# Debian's python3, where `make deps` installs the suites' modules (as the
# Makefile's PYTHON), not whichever python3 comes first on PATH.
PYTHON = os.environ.get("PYTHON") or (
    "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK)
    else sys.executable)
TAP = re.compile(r"^(not ok|ok)\b[^-]*-?\s*(.*?)(\s+#\s*SKIP\b.*)?$")
SUITE_TIMEOUT = int(os.environ.get("RAMCACHE_SUITE_TIMEOUT", "900"))
VM_TIMEOUT = int(os.environ.get("RAMCACHE_VM_TIMEOUT", "1500"))
VM_RUN = os.path.join(ROOT, "tests", "vm", "run.sh")
VM_TAG = "vm-6.1"
HOST_SUITES = ("tests/integration/test_systemd_boot.py",
               "tests/integration/test_podman.py",
               "tests/integration/test_docker.py")
# Integration suites that exercise a real kernel: BPF, cgroups, OOM, PSI.
VM_SUITES = ("tests/integration/test_monitor.py",
             "tests/integration/test_warning.py",
             "tests/integration/test_demo.py",
             "tests/integration/test_hardening.py",
             "tests/integration/test_domains.py",
             "comfyui/tests/test_e2e.py")
VM_LINE = re.compile(r"^# vm: (kernel .*)$")


def host_kernel():
    """'kernel 6.x, cgroup vN' of this machine, as the VM reports its own."""
    ver = 1
    try:
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            if "memory" in f.read().split():
                ver = 2
    except OSError:
        pass
    return f"kernel {os.uname().release}, cgroup v{ver}"


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
    for sub in ("tests/integration", "comfyui/tests", "python/tests"):
        d = os.path.join(ROOT, sub)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith("test_") and name.endswith(".py"):
                yield f"{sub}/{name}", [PYTHON, os.path.join(d, name)]


def vm_suites():
    for sub in VM_SUITES:
        path = os.path.join(ROOT, sub)
        if os.path.exists(path):
            yield f"{VM_TAG}/{sub}", [VM_RUN, PYTHON, path]


def run_suite(name, argv):
    passed = failed = skipped = 0
    start = time.monotonic()
    env = dict(os.environ, OUTPUT=OUTPUT, RAMCACHE_ROOT=ROOT)
    where = host_kernel()
    in_vm = name.startswith(VM_TAG + "/")
    try:
        # the VM enforces its own time limit and reports what it saw
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              timeout=VM_TIMEOUT + 60 if in_vm else
                              SUITE_TIMEOUT, text=True, errors="replace")
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    if in_vm:
        where = "not booted"
    for line in out.splitlines():
        v = VM_LINE.match(line)
        if v:
            where = v.group(1)
            continue
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
    print(f"     {name}: {time.monotonic() - start:.1f}s on {where}",
          flush=True)
    return passed, failed, skipped


def main():
    args = sys.argv[1:]
    no_vm = os.environ.get("RAMCACHE_NO_VM") == "1" or "--no-vm" in args
    fresh = os.environ.get("RAMCACHE_FRESH") == "1"
    kernels = "--kernels" in args
    args = [a for a in args if a not in ("--no-vm", "--kernels")]
    if any(a.startswith("-") for a in args) or len(args) > 1:
        print("usage: tests/run.py [--no-vm | --kernels] [SUBSTRING]",
              file=sys.stderr)
        return 2
    want = args[0] if args else ""
    total = [0, 0, 0]
    chosen = list(suites())
    if kernels:
        chosen = [s for s in chosen if s[0] in VM_SUITES]
    if fresh:
        chosen = [s for s in chosen if s[0] not in HOST_SUITES]
    if not no_vm:
        chosen += list(vm_suites())
    for name, argv in chosen:
        if want and want not in name:
            continue
        for i, n in enumerate(run_suite(name, argv)):
            total[i] += n
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
