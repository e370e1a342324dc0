#!/usr/bin/env python3
"""An executor whose entries are in use, for the agent's side of "Busy
entries" (docs/control-page.md), on the ramcache module's page.

It publishes --entries entries of --mib MiB of real memory each, all
flagged active, and holds --extra-mib more that no entry covers (the
memory a running job allocates). For --active-s seconds every entry stays
active; a command for one is answered at once with busy (--answer busy:
an executor with no safe point) or held and obeyed when the entries stop
being active (--answer hold). Then the entries stop being active, one
every --step-s, and a command for an inactive entry is obeyed at once. It
ends --tail-s after the last one stopped being active.

With --jobs N it runs N jobs instead: each job uses every entry cached
(all active, as a prompt that reads earlier outputs) and makes one more of
--mib MiB, a MiB at a time over --job-s seconds; between jobs nothing is in
use for --pause-s seconds, the only time an executor without safe points
(--answer busy) can free anything.

One JSON object per line: "ready", "cmd" (seq, id, active, t_ns), "ack"
(seq, id, status, t_ns), "inactive" (id, t_ns), "job" (n, cached), "done".
The project's python/ is on its PYTHONPATH (test_busy.py: rctest.py_env).
"""
import argparse
import json
import mmap
import os
import sys
import time

from ramcache import page as P


def say(**kw):
    print(json.dumps(kw), flush=True)


def blob(mib):
    m = mmap.mmap(-1, mib << 20, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, mib << 20, 4096):
        m[off] = 1
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=4)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--extra-mib", type=int, default=0)
    ap.add_argument("--active-s", type=float, default=5.0)
    ap.add_argument("--step-s", type=float, default=1.0)
    ap.add_argument("--tail-s", type=float, default=2.0)
    ap.add_argument("--answer", choices=("busy", "hold"), default="busy")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--job-s", type=float, default=1.0)
    ap.add_argument("--pause-s", type=float, default=0.5)
    a = ap.parse_args()
    if a.jobs:
        return jobs(a)

    page = P.Page(None, 64, 64)
    cache = {i: blob(a.mib) for i in range(1, a.entries + 1)}
    extra = blob(a.extra_mib) if a.extra_mib else None
    active = set(cache)
    held = []

    def publish(gen):
        with page.batch():
            for eid in cache:
                page.publish(eid, a.mib << 20, 0, gen, P.F_ACTIVE if eid in active else 0,
                             f"entry {eid}")
        page.set_generation(gen)

    def ack(cmd, status, freed):
        page.ack(cmd, status, freed)
        say(type="ack", seq=cmd.seq, id=cmd.entry_id, status=status, t_ns=P.now_ns())

    def evict(cmd):
        m = cache.pop(cmd.entry_id, None)
        if m is None:
            return ack(cmd, P.ACK_NOT_FOUND, 0)
        m.close()
        page.remove(cmd.entry_id)
        ack(cmd, P.ACK_EVICTED, a.mib << 20)

    publish(1)
    say(type="ready", pid=os.getpid())
    start = time.monotonic()
    next_off = start + a.active_s
    end = None
    while end is None or time.monotonic() < end:
        page.heartbeat()
        now = time.monotonic()
        if now >= next_off and active:
            eid = min(active)
            active.discard(eid)
            publish(1)
            say(type="inactive", id=eid, t_ns=P.now_ns())
            for cmd in [c for c in held if c.entry_id == eid]:
                held.remove(cmd)
                evict(cmd)
            next_off = now + a.step_s
            if not active:
                end = now + a.tail_s
        cmd = page.wait(20)
        if cmd is None:
            continue
        busy = cmd.entry_id in active
        say(type="cmd", seq=cmd.seq, id=cmd.entry_id, active=busy, t_ns=cmd.recv_ns)
        if not busy:
            evict(cmd)
        elif a.answer == "busy":
            ack(cmd, P.ACK_BUSY, 0)
        else:
            held.append(cmd)
    say(type="done", left=len(cache))
    del extra
    page.close()


def jobs(a):
    page = P.Page(None, 256, 64)
    cache, active, held = {}, set(), []

    def publish(gen):
        with page.batch():
            for eid, m in cache.items():
                page.publish(eid, len(m), 0, gen if eid in active else gen - 1,
                             P.F_ACTIVE if eid in active else 0, f"output {eid}")
        page.set_generation(gen)

    def ack(cmd, status, freed):
        page.ack(cmd, status, freed)
        say(type="ack", seq=cmd.seq, id=cmd.entry_id, status=status, t_ns=P.now_ns())

    def serve(until):
        while time.monotonic() < until:
            page.heartbeat()
            cmd = page.wait(10)
            if cmd is None:
                continue
            busy = cmd.entry_id in active
            say(type="cmd", seq=cmd.seq, id=cmd.entry_id, active=busy, t_ns=cmd.recv_ns)
            if busy and a.answer == "busy":
                ack(cmd, P.ACK_BUSY, 0)
            elif busy:
                held.append(cmd)
            elif cmd.entry_id in cache:
                m = cache.pop(cmd.entry_id)
                freed = len(m)
                m.close()
                page.remove(cmd.entry_id)
                ack(cmd, P.ACK_EVICTED, freed)
            else:
                ack(cmd, P.ACK_NOT_FOUND, 0)

    say(type="ready", pid=os.getpid())
    serve(time.monotonic() + a.pause_s * 4)  # the agent finds the page
    for job in range(1, a.jobs + 1):
        out = mmap.mmap(-1, a.mib << 20, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        active = set(cache) | {job}
        cache[job] = out
        publish(job)
        step = a.job_s / a.mib
        for mib in range(a.mib):  # the job's output grows while it runs
            for off in range(mib << 20, (mib + 1) << 20, 4096):
                out[off] = 1
            serve(time.monotonic() + step)
        active = set()
        publish(job)
        for cmd in held:  # the safe point: the end of the job
            m = cache.pop(cmd.entry_id, None)
            if m:
                freed = len(m)
                m.close()
                page.remove(cmd.entry_id)
            ack(cmd, P.ACK_EVICTED if m else P.ACK_NOT_FOUND, freed if m else 0)
        held.clear()
        say(type="job", n=job, cached=len(cache))
        serve(time.monotonic() + a.pause_s)
    say(type="done", left=len(cache))
    page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
