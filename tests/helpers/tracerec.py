#!/usr/bin/python3
"""Record an executor's memory trace for the forecast's replay tests.

    tracerec.py --pid PID --cgroup DIR --out FILE [--period 0.01] [--what TEXT]

Every --period seconds (10 ms) it reads the memory cgroup DIR (usage,
inactive file pages, limit, the count of charges that hit the limit) and
the executor's RSS, and, when the executor changed its entry table, its
control page (the memfd named ramcache in /proc/PID/fd). Writes the trace
format tests/unit/test_traces.c reads (tests/fixtures/traces/README.md):

    trace 1
    limit BYTES
    m T_US USAGE INACTIVE_FILE RSS MAPPED_FILE
    p T_US GENERATION / e ID BYTES USED_GEN FLAGS / end
    r T_US            the cgroup's usage came within 2 MiB of its limit: the
                      kernel reclaims (memory.failcnt stays 0 on some kernels)
    n T_US TEXT       a line written to the fifo --notes (e.g. prompt 3)

T_US is CLOCK_MONOTONIC in microseconds from the first sample. Stops when
the process exits or on SIGINT/SIGTERM. Needs root (another user's page).
"""
import argparse
import os
import signal
import struct
import sys
import time

MAGIC = 0x314C544343524152
EXEC = 128  # executor side of the header: heartbeat, entries_seq, nr, generation
ENTRY = struct.Struct("<QQQQQII48s")
LIMIT_SLACK = 2 << 20  # usage this close to the limit: the kernel reclaims


def page_path(pid):
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return ""
    for n in names:
        try:
            if os.readlink(f"{d}/{n}").startswith("/memfd:ramcache"):
                return f"{d}/{n}"
        except OSError:
            pass
    return ""


class Page:
    """The control page read with pread, every field checked for size."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY)
        hdr = os.pread(self.fd, 128, 0)
        (magic, _ver, _hs, self.size, self.max_entries, _ring, self.esize
         ) = struct.unpack_from("<QIIQIII", hdr, 0)
        self.eoff = struct.unpack_from("<Q", hdr, 56)[0]
        if magic != MAGIC or self.esize < ENTRY.size:
            raise ValueError("not a control page")
        self.seq = None

    def snapshot(self):
        """(generation, [(id, bytes, used_gen, flags)]) if the table changed
        since the last call and is not being written, else None."""
        ex = os.pread(self.fd, 24, EXEC)
        _hb, seq, nr, gen = struct.unpack("<QIIQ", ex)
        if seq & 1 or seq == self.seq:
            return None
        nr = min(nr, self.max_entries)
        raw = os.pread(self.fd, nr * self.esize, self.eoff)
        again = struct.unpack_from("<I", os.pread(self.fd, 4, EXEC + 8))[0]
        if again != seq or len(raw) < nr * self.esize:
            return None
        self.seq = seq
        rows = []
        for i in range(nr):
            eid, nbytes, _last, ug, _cost, flags, _r, _lab = ENTRY.unpack_from(
                raw, i * self.esize)
            if eid:
                rows.append((eid, nbytes, ug, flags))
        return gen, rows


def memcg_files(d):
    if os.path.exists(os.path.join(d, "memory.usage_in_bytes")):
        return ("memory.usage_in_bytes", "memory.limit_in_bytes",
                "total_inactive_file", "total_mapped_file")
    return "memory.current", "memory.max", "inactive_file", "file_mapped"


def read_int(path):
    with open(path) as f:
        s = f.read().strip()
    return 0 if s == "max" else int(s)


def stat_keys(d, *keys):
    found = dict.fromkeys(keys, 0)
    with open(os.path.join(d, "memory.stat")) as f:
        for line in f:
            k, v = line.split()
            if k in found:
                found[k] = int(v)
    return [found[k] for k in keys]


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--cgroup", required=True, help="the memory cgroup's directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--period", type=float, default=0.01)
    ap.add_argument("--what", default="", help="a comment for the header")
    ap.add_argument("--notes", help="a fifo: each line read is written as a note")
    a = ap.parse_args()
    usage_f, limit_f, inact_k, mapped_k = memcg_files(a.cgroup)
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    notes = os.open(a.notes, os.O_RDONLY | os.O_NONBLOCK) if a.notes else -1
    page = None
    t0 = time.monotonic_ns()
    at_limit = False
    with open(a.out, "w") as out:
        out.write("trace 1\n")
        if a.what:
            out.write(f"# {a.what}\n")
        limit = read_int(os.path.join(a.cgroup, limit_f))
        out.write(f"limit {limit}\n")
        while not stop:
            t = (time.monotonic_ns() - t0) // 1000
            try:
                r = rss(a.pid)
            except OSError:
                break
            usage = read_int(os.path.join(a.cgroup, usage_f))
            inactive, mapped = stat_keys(a.cgroup, inact_k, mapped_k)
            out.write(f"m {t} {usage} {inactive} {r} {mapped}\n")
            near = bool(limit) and usage + LIMIT_SLACK >= limit
            if near and not at_limit:
                out.write(f"r {t}\n")
            at_limit = near
            if page is None and page_path(a.pid):
                try:
                    page = Page(page_path(a.pid))
                except (OSError, ValueError, struct.error):
                    page = None
            snap = page.snapshot() if page else None
            if snap:
                out.write(f"p {t} {snap[0]}\n")
                for row in snap[1]:
                    out.write("e %d %d %d %d\n" % row)
                out.write("end\n")
            if notes >= 0:
                try:
                    for line in os.read(notes, 4096).decode().splitlines():
                        out.write(f"n {t} {line.strip()}\n")
                except BlockingIOError:
                    pass
            time.sleep(a.period)
    return 0


if __name__ == "__main__":
    sys.exit(main())
