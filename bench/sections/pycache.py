"""Section "pycache": the ramcache Python module against the caches Python
users already have (issue 35).

Per-call costs: PressureCache.get and set (a 100-byte value: its cache's
bucket; a 1 MiB one: a page entry of its own), a memoized function's hit
and miss, and the same for functools.lru_cache and a dict, for scale; in a
process of their own, no agent, best of 5 rounds.

A model server (python/tests/modelserver.py: 24 models of 32-128 MiB,
bytearrays, 150 Zipf-distributed requests, a miss costing the model's
bytes and 20 ms) in a 1 GiB memory cgroup without swap, `rounds` runs
each: a plain dict, functools.lru_cache(maxsize=8) and (maxsize=12),
@ramcache.memoize under the agent (default flags) and without one. OOM
kills, hits of 150, wall seconds.
"""
import json
import os
import subprocess
import sys

from rctest import Memcg, Proc, py_env
from common import AGENT, QUICK, ROOT, is_root, log
from harness import start_agent

SERVER = os.path.join(ROOT, "python", "tests", "modelserver.py")
PYTHON_DIR = os.path.join(ROOT, "python")  # the ramcache module's, for PYTHONPATH
LIMIT = 1 << 30
# (row, the server's cache, the agent follows it)
CASES = (("dict", "dict", False),
         ("functools.lru_cache(maxsize=8)", "lru8", False),
         ("functools.lru_cache(maxsize=12)", "lru12", False),
         ("@ramcache.memoize, agent", "memoize", True),
         ("@ramcache.memoize, no agent", "memoize", False))
FULL = {"rounds": 3, "requests": 150, "calls": 100_000}
QUICK_RUN = {"rounds": 1, "requests": 12, "calls": 5_000}

COSTS = r"""
import functools, json, os, sys, time
import ramcache
n = int(sys.argv[1])

def us(fn):  # best of 5 rounds of n calls, microseconds per call
    best = None
    for r in range(5):
        t0 = time.perf_counter_ns()
        fn(r)
        t = (time.perf_counter_ns() - t0) / n / 1000
        best = t if best is None else min(best, t)
    return round(best, 3)

c = ramcache.PressureCache("costs")
small, mib = bytes(100), bytearray(1 << 20)
for i in range(10000):
    c.set(i, small)
same = lambda f: functools.lru_cache(maxsize=None)(f)
memo, lru, d = ramcache.memoize(lambda x: x), same(lambda x: x), {}
for i in range(10000):
    memo(i), lru(i)
    d[i] = small
out = {
    "PressureCache.set, 100 B": us(lambda r: [c.set(i % 10000, small) for i in range(n)]),
    "PressureCache.set, 1 MiB": us(lambda r: [c.set(("m", i % 64), mib) for i in range(n)]),
    "PressureCache.get": us(lambda r: [c.get(i % 10000) for i in range(n)]),
    "@memoize, hit": us(lambda r: [memo(i % 10000) for i in range(n)]),
    "@memoize, miss": us(lambda r: [memo(-1 - i - r * n) for i in range(n)]),
    "lru_cache, hit": us(lambda r: [lru(i % 10000) for i in range(n)]),
    "lru_cache, miss": us(lambda r: [lru(-1 - i - r * n) for i in range(n)]),
    "dict, set": us(lambda r: [d.__setitem__(i % 10000, small) for i in range(n)]),
    "dict, get": us(lambda r: [d.get(i % 10000) for i in range(n)]),
}
print(json.dumps(out))
"""


def settings(cfg):
    """--quick's settings when the run is quick (common.QUICK's timeout:
    only --quick gives it), else the full ones."""
    return QUICK_RUN if cfg.get("timeout") == QUICK["timeout"] else FULL


def per_call_costs(calls):
    p = subprocess.run([sys.executable, "-c", COSTS, str(calls)],
                       capture_output=True, text=True, timeout=600, env=py_env(PYTHON_DIR))
    if p.returncode != 0:
        return {"skipped": f"the cost program failed: {p.stderr[-300:]}"}
    return json.loads(p.stdout)


def one_run(kind, agent, requests, timeout):
    """One server run in a fresh 1 GiB cgroup: its exit, OOM kills,
    requests served, hits, wall seconds (None when it was killed)."""
    argv = [sys.executable, SERVER, kind, "--requests", str(requests)]
    argv += ["--agent-wait", "20"] if agent else []
    a = None
    with Memcg(LIMIT, swap_limit=0) as cg:
        ex = Proc(argv, preexec=cg.preexec(), env=py_env(PYTHON_DIR))
        try:
            ready = ex.q.get(timeout=60)
            if not ready or "ready" not in ready:
                return {"skipped": "the server did not start: " + " ".join(ex.err[-3:])}
            if agent:
                a = start_agent(ready["ready"])
            ex.wait(timeout)
        finally:
            ex.kill()
            if a:
                a.stop()
        oom = cg.oom_kills()
    done = next((e for e in ex.events if e.get("done")), {})
    return {"rc": ex.rc, "oom_kills": oom, "served": sum("req" in e for e in ex.events),
            "hits": sum(bool(e.get("hit")) for e in ex.events),
            "wall_s": done.get("wall_s"), "stats": done.get("stats"),
            "guard": (done.get("guard") or {}).get("fired")}


def bench_pycache(cfg):
    if not is_root():
        return {"skipped": "needs root"}
    s = settings(cfg)
    res = {"method": __doc__.split("\n\n", 1)[1].strip().replace("`rounds`", str(s["rounds"])),
           "requests": s["requests"], "costs_us": per_call_costs(s["calls"]), "servers": {}}
    for row, kind, agent in CASES:
        if agent and not os.access(AGENT, os.X_OK):
            res["servers"][row] = {"skipped": f"{AGENT} is not built"}
            continue
        runs = []
        for r in range(s["rounds"]):
            runs.append(one_run(kind, agent, s["requests"], cfg["timeout"] * 2))
            log(f"pycache: {row} run {r + 1}: {runs[-1]}")
        res["servers"][row] = {"runs": runs}
    for line in report(res):
        log(line)
    return res


def report(sec):
    """The section as Markdown lines."""
    L = ["## Python caches: ramcache against functools and a dict", ""]
    if "servers" not in sec:
        return L + [f"Skipped: {sec.get('skipped', 'not run')}.", ""]
    L += [sec["method"], "", "| call | us |", "|---|---|"]
    L += [f"| {k} | {v} |" for k, v in sec["costs_us"].items()]
    n = sec["requests"]
    L += ["", f"| cache | OOM kills | hits/{n} per run | wall s per run |", "|---|---|---|---|"]
    for row, r in sec["servers"].items():
        if "runs" not in r:
            L.append(f"| {row} | skipped: {r['skipped']} | | |")
            continue
        runs = r["runs"]
        oom = sum(1 for x in runs if x.get("oom_kills"))
        hits = ", ".join(str(x.get("hits")) for x in runs)
        wall = ", ".join("killed at request %d" % x.get("served", 0) if x.get("oom_kills")
                         else str(x.get("wall_s")) for x in runs)
        L.append(f"| {row} | {oom} of {len(runs)} | {hits} | {wall} |")
    return L + [""]
