#!/usr/bin/env python3
"""PressureCache under the real agent, in a scratch 256 MiB memory cgroup.

A program caches 24 blobs of 16 MiB (384 MiB of real memory, one map
each) and keeps them all: in a plain dict it is OOM-killed (shown first,
so the case after it can fail); in a PressureCache whose own bound is out
of reach (max_bytes 1 TiB) only the agent's commands can keep it alive,
and they must: 0 OOM kills, entries evicted by the agent. Then the agent
is killed with SIGKILL half way: the cache hears of it at once ("died",
through agent_lock), keeps to its own bound from then on (here 96 MiB),
and is not OOM-killed either. With 5,000 small entries cached first, the
agent's commands still go to the blobs.
"""
import json
import os
import signal
import subprocess
import sys

from rctest import AGENT, MiB, ROOT, Agent, Memcg, Skip, main, py_env, require_root, test

LIMIT = 256 * MiB
PROGRAM = """
import json, mmap, os, sys, time
import ramcache

kind, max_mib, small = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if kind == "dict":
    cache = {}
else:
    cache = ramcache.PressureCache("blobs", max_bytes=max_mib << 20)
    states = []
    cache._ex.on_agent.append(lambda st, t: states.append(st))
    for i in range(small):  # small entries first, as a long-running server has
        cache.set(("small", i), bytes(100))
print(json.dumps({"ready": os.getpid()}), flush=True)
if kind != "dict":  # the agent first: it takes a second to attach
    end = time.monotonic() + 20
    while not cache.agent_alive and time.monotonic() < end:
        time.sleep(0.02)
print(json.dumps({"agent": kind != "dict" and cache.agent_alive}), flush=True)
for i in range(24):
    m = mmap.mmap(-1, 16 << 20)
    for off in range(0, 16 << 20, 4096):
        m[off] = 1
    if kind == "dict":
        cache[i] = m
    else:
        cache.set(i, m, cost=0.05)
    print(json.dumps({"made": i + 1}), flush=True)
    time.sleep(0.15)
out = {"done": True, "left": len(cache)}
if kind != "dict":
    out.update(stats=dict(cache.stats), states=states, bytes=cache.bytes)
print(json.dumps(out), flush=True)
"""


def run(kind, max_mib=1 << 20, kill_agent_at=None, small=0):
    """The program in a fresh cgroup: (exit code, its lines, OOM kills,
    the agent or None)."""
    require_root()
    if kind != "dict" and not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    with Memcg(LIMIT) as cg:
        p = subprocess.Popen([sys.executable, "-c", PROGRAM, kind, str(max_mib), str(small)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=cg.preexec(), env=py_env(os.path.join(ROOT, "python")))
        agent = None
        lines = []
        try:
            first = json.loads(p.stdout.readline() or "{}")
            assert "ready" in first, p.stderr.read()
            if kind != "dict":
                agent = Agent("--pid", first["ready"], "--headroom", "48M",
                              "--inactive", "96M")
            for line in p.stdout:
                ev = json.loads(line)
                lines.append(ev)
                if agent is not None and kill_agent_at and ev.get("made") == kill_agent_at:
                    agent.proc.send_signal(signal.SIGKILL)
            rc = p.wait(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            if agent is not None:
                agent.stop()
        return rc, lines, cg.oom_kills(), agent


@test
def a_plain_dict_is_oom_killed():
    rc, lines, ooms, _ = run("dict")
    assert rc == -signal.SIGKILL and ooms >= 1, (rc, ooms, lines[-2:])
    made = max(e.get("made", 0) for e in lines)
    print(f"# a dict: OOM-killed after {made} blobs of 16 MiB")


@test
def a_pressure_cache_under_the_agent_is_never_oom_killed():
    rc, lines, ooms, agent = run("cache")
    assert rc == 0 and ooms == 0, (rc, ooms, lines[-2:], agent.stderr[-5:])
    assert lines[0] == {"agent": True}, lines[0]
    done = lines[-1]
    st = done["stats"]
    assert st.get("evicted_by_agent", 0) >= 8, st  # 384 MiB never fit
    assert done["bytes"] < LIMIT and st.get("evicted_lru", 0) == 0, done
    acked = [e for e in agent.of_type("evict_done") if e["status"] == "evicted"]
    assert len(acked) == st["evicted_by_agent"], (len(acked), st)
    print(f"# PressureCache: {st['evicted_by_agent']} of 24 blobs evicted by the "
          f"agent, {done['left']} kept, 0 OOM kills")


@test
def a_killed_agent_leaves_the_cache_to_its_own_bound():
    rc, lines, ooms, agent = run("cache", max_mib=96, kill_agent_at=12)
    assert rc == 0 and ooms == 0, (rc, ooms, lines[-2:])
    done = lines[-1]
    st = done["stats"]
    assert done["states"][-1] == "died", done["states"]  # agent_lock, at once
    assert st.get("fallbacks") == 1 and st.get("evicted_lru", 0) >= 1, st
    assert done["bytes"] <= 96 * MiB, done
    print(f"# agent killed at blob 12: {st.get('evicted_by_agent', 0)} evicted by it, "
          f"then {st['evicted_lru']} by the cache's own bound (96 MiB)")


@test
def five_thousand_small_entries_do_not_take_the_agents_evictions():
    """Issue 35: 5,000 small entries took the page's 4,096 slots, the blobs
    came after, unseen, and the agent's evictions went to 100-byte
    entries. Now the small ones are one page entry (the cache's bucket):
    the agent's commands go to the blobs (or, at most, to the bucket as a
    whole), and the cache is never OOM-killed."""
    rc, lines, ooms, agent = run("cache", small=5000)
    assert rc == 0 and ooms == 0, (rc, ooms, lines[-2:], agent.stderr[-5:])
    evicts = agent.of_type("evict")
    small = [e for e in evicts if e["bytes"] < MiB and "entries>" not in e["label"]]
    buckets = [e for e in evicts if "entries>" in e["label"]]
    blobs = [e for e in evicts if e["bytes"] >= 16 * MiB]
    assert not small, f"{len(small)} of {len(evicts)} commands for small entries: {small[:3]}"
    assert len(buckets) <= 1 and len(blobs) >= 8, (len(buckets), len(blobs))
    print(f"# 5,000 small entries + 24 blobs: {len(blobs)} commands for blobs, "
          f"{len(buckets)} for the bucket, 0 for single small entries")


main()
