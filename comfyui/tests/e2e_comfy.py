#!/usr/bin/env python3
"""A stand-in ComfyUI process for test_e2e.py: loads the package, builds the
prompt worker with '--cache-ram <active> 0', prints one JSON line when its
control page exists, waits for a line on stdin, then runs prompts that each
cache a new tensor (so the inactive part of the cache grows) through a long
sampling node, printing one JSON line per prompt."""
import argparse
import json
import os
import sys

import env
from env import node


def out(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--step-s", type=float, default=0.05)
    ap.add_argument("--active", type=float, default=1.0, help="--cache-ram active GB")
    ap.add_argument("--control", choices=("memfd", "file"), default="file",
                    help="the page: a memfd, or the file the agent looks for by pid")
    a = ap.parse_args()
    if a.control == "file":
        os.environ["RAMCACHE_CONTROL"] = f"/dev/shm/ramcache-{os.getpid()}"
    else:
        os.environ.pop("RAMCACHE_CONTROL", None)
    pkg = env.load_package()
    bridge = pkg.bridge.BRIDGE
    w = env.worker("RAM_PRESSURE", ram=a.active, ram_inactive=0)
    out(ready=True, pid=os.getpid(), page=bridge.page.path if bridge.page else None,
        reason=bridge.disabled)
    sys.stdin.readline()
    for i in range(a.prompts):
        p = {"t": node("MakeTensor", mib=a.mib, tag=f"e2e-{i}"),
             "k": node("Sampler", steps=a.steps, latent=["t", 0], step_s=a.step_s, tag=str(i)),
             "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], f"p{i}", timeout=300)
        cache = w.executor.caches.outputs.cache
        out(prompt=i, ok=ok, entries=len(cache), attached=bridge.agent_alive(),
            evicted=bridge.evicted_total, msgs=[m[0] for m in msgs])
    out(done=True, evicted=bridge.evicted_total, freed=bridge.freed_total,
        attached=bridge.agent_alive())
    w.stop()
    bridge.close()


if __name__ == "__main__":
    main()
