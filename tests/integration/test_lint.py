#!/usr/bin/env python3
"""Static checks as test cases: `make lint` (cppcheck), `make
check-format` (clang-format with the repo's .clang-format), and the floors
of user/'s folders (what each may include and call)."""
import glob
import os
import re
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


# user/'s folders, each with the folders it may include from: core/ is
# pure, proc/ reads files, page/ is the control page, kernel/ the only user
# of libbpf; executors/ and out/ put them together; user/ itself is the loop.
FLOORS = {
    "core": {"core"},
    "proc": {"core", "proc"},
    "page": {"core", "proc", "page"},
    "kernel": {"core", "proc", "page", "kernel"},
    "out": {"core", "proc", "page", "kernel", "out"},
    "executors": {"core", "proc", "page", "kernel", "out", "executors"},
}
INCLUDE = re.compile(r'^#include\s+"([a-z]+)/[^"]+"', re.M)
LIBBPF = re.compile(r'^#include\s+[<"](bpf/libbpf\.h|bpf/bpf\.h|[a-z]+\.skel\.h)[>"]',
                    re.M)
# what "pure" rules out in core/: files, the clock, processes, printing
IO_CALL = re.compile(r"\b(open|openat|fopen|read|pread|write|stat|fstat|"
                     r"opendir|readlink|mmap|clock_gettime|syscall|fprintf|"
                     r"printf|kill|fork|execve?)\s*\(")


def user_files(folder):
    return sorted(glob.glob(os.path.join(ROOT, "user", folder, "*.[ch]")))


def floor_breaks():
    bad = []
    for folder, allowed in FLOORS.items():
        for path in user_files(folder):
            with open(path) as f:
                text = f.read()
            rel = os.path.relpath(path, ROOT)
            bad += [f"{rel} includes {d}/" for d in INCLUDE.findall(text)
                    if d not in allowed | {"ramcache"}]
            if folder != "kernel" and LIBBPF.search(text):
                bad.append(f"{rel} uses libbpf outside kernel/")
            code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
            if folder == "core" and IO_CALL.search(code):
                bad.append(f"{rel} does I/O: {IO_CALL.search(code).group(0)}")
    for path in user_files(""):
        with open(path) as f:
            if LIBBPF.search(f.read()):
                bad.append(f"{os.path.relpath(path, ROOT)} uses libbpf "
                           "outside kernel/")
    return bad


@test
def user_folders_keep_their_floors():
    """core/ pure, kernel/ the only user of libbpf, each folder including
    only from the folders under it (see the README's code map)."""
    assert os.path.isdir(os.path.join(ROOT, "user", "core"))
    bad = floor_breaks()
    assert not bad, "\n".join(bad)


main()
