#!/usr/bin/env python3
"""Whoever writes the followed page cannot saturate the agent: with a
65536-entry page and a memcg reclaim storm asking for an evaluation on
every event, evaluations are coalesced and paced (far fewer evaluations
than requests) and the ring buffer keeps up (no events dropped). Counts,
not timings."""
import contextlib
import json
import os
import subprocess

from rctest import (HELPERS, MiB, Agent, Memcg, main, require_root,
                    scratch_dir, test)

EXECUTOR = os.path.join(HELPERS, "executor")
MEMHOG = os.path.join(HELPERS, "memhog")


@contextlib.contextmanager
def popen(argv, **kw):
    p = subprocess.Popen(list(map(str, argv)), **kw)
    try:
        yield p
    finally:
        p.kill()
        p.wait()


@test
def big_page_and_reclaim_storm_keep_the_loop_within_budget():
    require_root()
    with Memcg(96 * MiB) as cg, scratch_dir("overload-") as d:
        data = os.path.join(d, "weights")
        with open(data, "wb") as f:
            f.truncate(192 * MiB)  # sparse: page cache, never on disk
        with popen([EXECUTOR, "--entries", 65536, "--bytes", 1 << 20],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                   preexec_fn=cg.preexec()) as ex:
            ready = json.loads(ex.stdout.readline())
            assert ready["type"] == "ready", ready
            with Agent("--pid", ready["pid"], "--headroom", "100T",
                       "--interval", "1s", "--duration", "6s") as a:
                assert a.wait_type("start"), a.stderr
                with popen([MEMHOG, "--map", data, "--thrash", 4],
                           stdout=subprocess.DEVNULL,
                           preexec_fn=cg.preexec()) as hog:
                    hog.wait(timeout=60)
                rc = a.wait(timeout=30)
    assert rc == 0, (rc, a.stderr[-5:])
    s = a.of_type("summary")[-1]
    reclaims = len([e for e in a.of_type("reclaim")
                    if e.get("kind") == "memcg"])
    evicts = len(a.of_type("evict"))
    print(f"# 65536 entries: {reclaims} memcg reclaim events, "
          f"{s['eval_requests']} evaluation requests, {s['evaluations']} "
          f"evaluations, {evicts} commands, {s['drops']} events dropped")
    assert reclaims >= 200, "the storm was too small to show anything"
    assert evicts > 0, "the agent never evaluated the big page"
    assert s["drops"] == 0, s
    # coalesced and paced: nowhere near one evaluation per event
    assert s["evaluations"] * 4 <= s["eval_requests"], s


main()
