#!/usr/bin/env python3
"""A model server in miniature, the workload of issues 35 and 38: 24
"models" (bytearrays of 32-128 MiB, real memory: bytearray(n) writes
every byte) served over 150 Zipf-distributed requests, each model made
again (its bytes and a short computation) when it is not cached.

  modelserver.py CACHE [--requests N] [--seed S] [--agent-wait S]
                  [--budget SIZE]

CACHE: dict (keep every model), lru8 / lru12 (functools.lru_cache with
that maxsize), memoize (@ramcache.memoize, default bounds). With
--agent-wait the memoize server waits up to S seconds for an agent
before the first request. One JSON object a line on stdout: ready (the
pid), each request (its number, hit or miss), each change of the agent's
state as the cache hears it (CLOCK_MONOTONIC ns), and done (hits, wall
seconds, the cache's stats). The test suites and bench/sections/pycache.py
run it in a memory cgroup, with the project's python/ on PYTHONPATH."""
import argparse
import functools
import json
import os
import random
import threading
import time

MiB = 1 << 20
MODELS = 24
WORK_S = 0.02  # a miss: the model's bytes, then this long computing
SERVE_S = 0.005  # every request: this long serving the answer


_SAY = threading.Lock()


def say(**kw):
    """One line: the agent's state changes are told from the cache's
    serving thread, the requests from the main one (print writes the text
    and its newline apart: two threads could share a line)."""
    with _SAY:
        print(json.dumps(kw), flush=True)


def plan(requests, seed):
    """The models' sizes (MiB) and the requests: model k asked with weight
    1 / (k + 1) (Zipf, s = 1), both fixed by @seed."""
    rnd = random.Random(seed)
    sizes = [rnd.randint(32, 128) for _ in range(MODELS)]
    weights = [1.0 / (k + 1) for k in range(MODELS)]
    return sizes, rnd.choices(range(MODELS), weights, k=requests)


def server(kind, sizes, ramcache):
    """The serving function for @kind and a hits() that counts its hits."""
    def load(k):
        model = bytearray(sizes[k] * MiB)
        time.sleep(WORK_S)
        return model

    if kind == "dict":
        models = {}
        hits = [0]

        def serve(k):
            if k in models:
                hits[0] += 1
                return models[k]
            models[k] = load(k)
            return models[k]
        return serve, lambda: hits[0]
    if kind in ("lru8", "lru12"):
        serve = functools.lru_cache(maxsize=int(kind[3:]))(load)
        return serve, lambda: serve.cache_info().hits
    serve = ramcache.memoize(load)
    return serve, lambda: serve.cache.stats.get("hits", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache", choices=("dict", "lru8", "lru12", "memoize"))
    ap.add_argument("--requests", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--agent-wait", type=float, default=0)
    ap.add_argument("--budget", help="ramcache.budget.max_bytes (e.g. 1T: none)")
    a = ap.parse_args()
    import ramcache
    if a.budget:
        ramcache.budget.max_bytes = a.budget

    sizes, reqs = plan(a.requests, a.seed)
    serve, hits = server(a.cache, sizes, ramcache)
    cache = getattr(serve, "cache", None)
    if cache is not None and cache._ex is not None:
        cache._ex.on_agent.append(lambda st, t: say(agent=st, t_ns=t))
    say(ready=os.getpid())
    if cache is not None and a.agent_wait:
        end = time.monotonic() + a.agent_wait
        while not cache.agent_alive and time.monotonic() < end:
            time.sleep(0.02)
    t0 = time.monotonic()
    for i, k in enumerate(reqs):
        before = hits()
        serve(k)
        time.sleep(SERVE_S)
        say(req=i + 1, hit=hits() > before, t_ns=time.monotonic_ns())
    out = {"done": True, "hits": hits(), "wall_s": round(time.monotonic() - t0, 3)}
    if cache is not None:
        out.update(stats=dict(cache.stats), bytes=cache.bytes)
        g = getattr(ramcache, "guard", None)  # none before issue 38
        out.update(guard={"checks": g.checks, "fired": g.fired, "evicted": g.evicted,
                          "last": g.last} if g else None)
    say(**out)


if __name__ == "__main__":
    main()
