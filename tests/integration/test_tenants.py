#!/usr/bin/env python3
"""Tenants of one memory limit under `--all` who cannot hurt each other
(issue 34): what a member's growth will take is charged to that member,
only what is short now is the domain's. Executors of tests/helpers/loadexec.py
(the project's Python module) in child cgroups of a scratch parent:

- A caches 8 x 16 MiB (inactive); B, in the same 512 MiB parent, takes
  250 MiB, holds it 0.2 s and frees it, every 0.9 s: A keeps every entry
  (before, the domain's forecast ran B's bursts on over the horizon and
  evicted all of A's, with 188 MiB really free);
- A caches 4 x 32 MiB, B 8 x 16 MiB; B takes 300 MiB and keeps it (more
  than is free): B's own entries go first, and A loses no more than B
  (ranked across the domain, A's bigger entries went first).
"""
import os
import sys
import time

from rctest import (MiB, ROOT, SYS_PYTHON, Agent, ParentMemcg, Proc,  # noqa: E402
                    main, py_env, require_root, test, wait_page)

LOADEXEC = os.path.join(ROOT, "tests", "helpers", "loadexec.py")
LIMIT = 512 * MiB
BURSTS = 10


def loadexec(dom, i, entries, mib, *flags):
    p = Proc([SYS_PYTHON, LOADEXEC, entries, mib, *flags], stdin=True,
             preexec=dom.preexec(i), env=py_env(os.path.join(ROOT, "python")))
    assert p.wait_type("ready", 30), p.err
    assert wait_page(p.pid, timeout=10), "no page"
    return p


def attached(agent, pid):
    return agent.wait_for(lambda e: e.get("type") == "control" and e.get("pid") == pid
                          and e.get("state") == "attached", timeout=30)


def evicted(p):
    return [e for e in p.of_type("evicted")]


def bursts_beside():
    """A's evictions while B (an executor with a pinned entry) bursts: (A's
    evicted events, the agent's evict events, OOM kills)."""
    with ParentMemcg(LIMIT, 2, "tenants") as dom:
        a = loadexec(dom, 0, 8, 16)
        agent = Agent("--all", "--cgroup", dom.rel, "--interval", "1s")
        b = None
        try:
            assert attached(agent, a.pid), agent.stderr
            b = loadexec(dom, 1, 1, 8, "--pinned")
            assert attached(agent, b.pid), agent.stderr
            b.send(f"burst 250 200 {BURSTS} 900\n")
            time.sleep(BURSTS * 0.9 + 2)
        finally:
            for p in (a, b):
                if p is not None:
                    p.kill()
            agent.stop()
        return evicted(a), agent.of_type("evict"), dom.oom_kills()


@test
def another_executors_bursts_evict_none_of_your_cache():
    require_root()
    lost, evicts, kills = bursts_beside()
    assert not lost, f"A lost {len(lost)} of 8 to B's bursts: {evicts[:4]}"
    assert kills == 0




@test
def a_member_that_keeps_what_it_took_pays_first():
    require_root()
    with ParentMemcg(LIMIT, 2, "tenants") as dom:
        # A's entries the bigger: ranked across the domain, A's go first
        a = loadexec(dom, 0, 4, 32)
        b = loadexec(dom, 1, 8, 16)
        agent = Agent("--all", "--cgroup", dom.rel, "--interval", "1s")
        try:
            assert attached(agent, a.pid) and attached(agent, b.pid), agent.stderr
            b.send("grow 300\n")  # kept, safe points as it grows
            assert b.wait_type("grown", 60), (b.err, dom.oom_kills())
            time.sleep(2)
        finally:
            a.kill()
            b.kill()
            agent.stop()
        lost_a, lost_b = len(evicted(a)) * 32, len(evicted(b)) * 16
        assert lost_b > 0, f"B lost nothing: {agent.of_type('evict')[:4]}"
        assert lost_a <= lost_b, f"A lost {lost_a} MiB, B {lost_b} MiB"
        assert dom.oom_kills() == 0
        print(f"# B took 300 MiB: B lost {lost_b} MiB of its own, A {lost_a} MiB")


if __name__ == "__main__":
    sys.exit(main())
