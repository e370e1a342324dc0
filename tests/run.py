#!/usr/bin/env python3
"""Run every test suite and print one summary line.

A suite is an executable that prints TAP: the C unit tests in
$OUTPUT/tests/test_*, the same built with ASan+UBSan in
$OUTPUT/asan/tests/test_* (named asan/test_*), and the Python suites tests/integration/test_*.py,
comfyui/tests/test_*.py and python/tests/test_*.py. A suite that exits non-zero without reporting a
failing case counts as one failure, so a crash is never lost.

The suites that need a real kernel (VM_SUITES) run on this machine's kernel
and in VMs booting Debian's packaged 6.1 (Debian 12) and 6.12 (Debian 13,
as bookworm carries it) kernels with cgroup v2 (tests/vm/run.sh), named
vm-6.1/<suite> and vm-6.12/<suite>: all but test_demo on 6.1, and on 6.12 those
whose result depends on the kernel (KERNEL_SUITES); --kernels runs all of
them on both. Each suite boots a VM of its own (run.py --guest inside), so
none inherits what another left in the kernel; each suite's last line says
which kernel and cgroup version it ran on.

The suites that boot or package a system of their own (HOST_SUITES: the
systemd unit under systemd as PID 1, the container engines) are left out
with RAMCACHE_FRESH=1 (make test-fresh): they build their roots from the
host's debootstrap cache, install nothing the fresh root could lack, and
have run on this kernel already. So are RATE_SUITES, which count how often
a rare failure (an OOM kill) happens on this kernel by repeating a run:
the host's make test just counted it on the same kernel, and they use
nothing installed that the other suites do not.

Usage: tests/run.py [--no-vm | --kernels] [SUBSTRING]
  SUBSTRING   run only suites whose name contains it
  --no-vm     leave out the VM suites (also RAMCACHE_NO_VM=1)
  --kernels   only the VM_SUITES, on this kernel and all of them in each VM
              (make vmtest)
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
# a suite in the VM, under emulation: slower than here
VM_SUITE_TIMEOUT = int(os.environ.get("RAMCACHE_VM_SUITE_TIMEOUT", "1500"))
# one boot: a suite and the VM's start
VM_TIMEOUT = int(os.environ.get("RAMCACHE_VM_TIMEOUT", "1800"))
VM_RUN = os.path.join(ROOT, "tests", "vm", "run.sh")
VM_KERNELS = ("6.1", "6.12")
HOST_SUITES = ("tests/integration/test_systemd_boot.py",
               "tests/integration/test_podman.py",
               "tests/integration/test_docker.py")
# Suites whose point is a rate on this kernel (rctest.repeats): left out
# of the fresh root (above); some 150 s of make test-fresh.
RATE_SUITES = ("tests/integration/test_busy.py",
               "python/tests/test_guard.py")
# Integration suites that exercise a real kernel: BPF, cgroups, OOM, PSI.
VM_SUITES = ("tests/integration/test_monitor.py",
             "tests/integration/test_warning.py",
             "tests/integration/test_demo.py",
             "tests/integration/test_hardening.py",
             "tests/integration/test_domains.py",
             "comfyui/tests/test_e2e.py")
# What make test runs on each VM kernel; make vmtest (--kernels) runs all
# of VM_SUITES on every one. On 6.12 only the suites whose result depends
# on the kernel: the programs loaded on its tracepoints, the warning and
# its ramp, the executor end to end: some 4 min on this machine, where all
# six take some 12, more than .ci/run can spare.
KERNEL_SUITES = ("tests/integration/test_monitor.py",
                 "tests/integration/test_warning.py",
                 "comfyui/tests/test_e2e.py")
# On 6.1 all but the demo (the same script as test_demo on this kernel;
# its kernel parts are test_monitor's and test_warning's), which make
# vmtest still runs there: about 100 s that .ci/run cannot spare.
TEST_MATRIX = {"6.1": tuple(s for s in VM_SUITES
                            if s != "tests/integration/test_demo.py"),
               "6.12": KERNEL_SUITES}
VM_LINE = re.compile(r"^# vm: (kernel .*)$")
# what the VM's run.py --guest prints around each suite
SUITE_BEGIN = re.compile(r"^# suite-begin (\S+)$")
SUITE_END = re.compile(r"^# suite-end (\S+) (\S+) ([\d.]+)$")


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


def execute(argv, timeout):
    """Run a suite; its output and exit code ("timeout" if it ran out)."""
    env = dict(os.environ, OUTPUT=OUTPUT, RAMCACHE_ROOT=ROOT)
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout,
                              text=True, errors="replace")
        return proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
        return out, "timeout"


def report(name, out, rc, seconds, where):
    """Print a suite's cases and timing line; (passed, failed, skipped)."""
    passed = failed = skipped = 0
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
    print(f"     {name}: {seconds:.1f}s on {where}", flush=True)
    return passed, failed, skipped


def run_suite(name, argv):
    start = time.monotonic()
    out, rc = execute(argv, SUITE_TIMEOUT)
    return report(name, out, rc, time.monotonic() - start, host_kernel())


def run_vm(kernel, paths):
    """Boot the @kernel VM once and run the suites @paths in it; each is
    reported as vm-KERNEL/<suite> as it ends, timed from the end of the one
    before (the first from the boot). A suite the VM did not finish counts
    as failed."""
    tag = f"vm-{kernel}"
    env = dict(os.environ, OUTPUT=OUTPUT, RAMCACHE_ROOT=ROOT,
               RAMCACHE_VM_KERNEL=kernel, RAMCACHE_VM_TIMEOUT=str(VM_TIMEOUT))
    argv = [VM_RUN, PYTHON, os.path.join(ROOT, "tests", "run.py"), "--guest",
            *paths]
    total = [0, 0, 0]
    where, cur, lines, tail = "not booted", None, [], []
    start = last = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    for line in proc.stdout:
        line = line.rstrip("\n")
        v, b, e = VM_LINE.match(line), SUITE_BEGIN.match(line), \
            SUITE_END.match(line)
        if v and cur is None:
            where = v.group(1)
        elif b:
            cur, lines = b.group(1), []
        elif e and e.group(1) == cur:
            rc = int(e.group(2)) if e.group(2).lstrip("-").isdigit() \
                else e.group(2)
            now = time.monotonic()
            for i, n in enumerate(report(f"{tag}/{cur}", "\n".join(lines), rc,
                                         now - last, where)):
                total[i] += n
            last = now
            paths = [p for p in paths if p != cur]
            cur = None
        elif cur is not None:
            lines.append(line)
        else:
            tail = (tail + [line])[-40:]
    rc = proc.wait()
    for path in paths:  # what the VM never finished
        out = "\n".join(lines if path == cur else tail)
        for i, n in enumerate(report(
                f"{tag}/{path}", out + f"\n# the VM ended (exit {rc}) before "
                "this suite did", rc or "not run",
                time.monotonic() - start, where)):
            total[i] += n
        lines = []
    return total


def guest(paths):
    """Inside the VM: run each suite, its raw output between markers."""
    worst = 0
    for path in paths:
        print(f"# suite-begin {path}", flush=True)
        start = time.monotonic()
        out, rc = execute([PYTHON, os.path.join(ROOT, path)], VM_SUITE_TIMEOUT)
        sys.stdout.write(out if out.endswith("\n") or not out else out + "\n")
        print(f"# suite-end {path} {rc} {time.monotonic() - start:.1f}",
              flush=True)
        worst = worst or (rc != 0)
    return 1 if worst else 0


def main():
    args = sys.argv[1:]
    if args[:1] == ["--guest"]:
        return guest(args[1:])
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
        chosen = [s for s in chosen
                  if s[0] not in HOST_SUITES + RATE_SUITES]
    for name, argv in chosen:
        if want and want not in name:
            continue
        for i, n in enumerate(run_suite(name, argv)):
            total[i] += n
    if not no_vm:
        for kernel in VM_KERNELS:
            listed = VM_SUITES if kernels else TEST_MATRIX[kernel]
            paths = [p for p in listed
                     if os.path.exists(os.path.join(ROOT, p))
                     and (not want or want in f"vm-{kernel}/{p}")]
            for path in paths:
                for i, n in enumerate(run_vm(kernel, [path])):
                    total[i] += n
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
