#!/usr/bin/env python3
"""The agent's own memory: locked before any thread starts, thread stacks
sized to need, and scrapes answered while the endpoint is flooded.

Sizes are checked against fixed bounds that the old code broke by a wide
margin (an 8 MiB locked stack); how small the agent is, and how little CPU
it takes, is measured in `make bench`, never asserted here."""
import os
import socket
import subprocess
import urllib.request

import promtext
from rctest import Agent, main, require_root, test, free_port


def sleeper():
    return subprocess.Popen(["sleep", "600"])


def scrape(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        assert r.status == 200, r.status
        return r.read().decode()


def smaps(pid):
    """[(lo, hi, {field: kB}, vmflags)] of /proc/PID/smaps."""
    out = []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                out.append([lo, hi, {}, set()])
            elif line.startswith("VmFlags:"):
                out[-1][3] = set(line.split()[1:])
            elif line.endswith(" kB\n"):
                k, v = line.split(":", 1)
                out[-1][2][k] = int(v.split()[0])
    return out


def thread_sp(pid, tid):
    """Stack pointer of a thread blocked in a system call, else None."""
    with open(f"/proc/{pid}/task/{tid}/syscall") as f:
        fields = f.read().split()
    return int(fields[-2], 16) if len(fields) >= 3 else None


@test
def threads_start_locked_with_stacks_sized_to_need():
    """mlockall comes before the metrics thread: its stack is locked as it
    is used, and it is small (the old code locked an 8 MiB stack)."""
    require_root()
    s = sleeper()
    addr = f"127.0.0.1:{free_port()}"
    try:
        with Agent("--pid", s.pid, "--no-evict", "--metrics", addr) as a:
            assert a.wait_type("start"), a.stderr
            assert promtext.parse(scrape(addr)), "empty scrape"
            pid = a.proc.pid
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")
                    if int(t) != pid]
            assert tids, "no metrics server thread"
            maps = smaps(pid)
            for tid in tids:
                sp = None
                for _ in range(100):
                    sp = thread_sp(pid, tid)
                    if sp:
                        break
                    a.wait_for(lambda e: False, 0.05)
                assert sp, f"thread {tid} never blocked in a system call"
                vma = next(m for m in maps if m[0] <= sp < m[1])
                size = vma[1] - vma[0]
                print(f"# thread {tid}: stack {size // 1024} KiB, "
                      f"{vma[2].get('Rss')} kB resident, flags "
                      f"{' '.join(sorted(vma[3]))}")
                assert "lo" in vma[3], ("thread stack not locked", vma)
                assert size <= 256 * 1024, ("thread stack", size)
            assert a.stop() == 0, a.stderr
    finally:
        s.kill()
        s.wait()


@test
def scrapes_are_answered_through_an_idle_connection_flood():
    """64 connections that send nothing or half a request, from the same
    address as the scraper: the agent sheds the oldest idle ones."""
    require_root()
    s = sleeper()
    port = free_port()
    addr = f"127.0.0.1:{port}"
    flood = []
    try:
        with Agent("--pid", s.pid, "--no-evict", "--metrics", addr) as a:
            assert a.wait_type("start"), a.stderr
            for i in range(64):
                c = socket.create_connection(("127.0.0.1", port), timeout=5)
                if i % 2:
                    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                flood.append(c)
            assert promtext.parse(scrape(addr)), "empty scrape"
            assert flood[0].recv(64) == b"", "oldest idle connection open"
            assert a.proc.poll() is None, a.stderr
            assert a.stop() == 0, a.stderr
    finally:
        for c in flood:
            c.close()
        s.kill()
        s.wait()


main()
