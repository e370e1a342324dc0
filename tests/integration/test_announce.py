#!/usr/bin/env python3
"""An executor announces an allocation before it takes it
(docs/control-page.md, "Announcing an allocation"), against the real agent
with its defaults, executors of tests/helpers/loadexec.py (the project's
Python module) in scratch memory cgroups:

- alone in a 512 MiB cgroup with 5 x 64 MiB of inactive entries, an
  executor announces a 200 MiB load: the agent counts it (expect_seen_ns),
  commands entries before a byte of the load is taken, and the load fits;
- in a domain of two (a 640 MiB parent), an executor announcing far more
  than the limit (a hostile or wrong figure) loses its own entries only:
  the other executor's, of the same age, all stay;
- an announcement stamped a minute ago is ignored: no command, no echo.
"""
import os
import sys

from rctest import (MiB, ROOT, SYS_PYTHON, Agent, Memcg, ParentMemcg,  # noqa: E402
                    Proc, main, py_env, require_root, test, wait_page)

LOADEXEC = os.path.join(ROOT, "tests", "helpers", "loadexec.py")


def loadexec(entries, mib, preexec, *flags):
    p = Proc([SYS_PYTHON, LOADEXEC, entries, mib, *flags], stdin=True, preexec=preexec,
             env=py_env(os.path.join(ROOT, "python")))
    assert p.wait_type("ready", 30), p.err
    assert wait_page(p.pid, timeout=10), "no page"
    return p


def attached(agent, pid):
    return agent.wait_for(lambda e: e.get("type") == "control" and e.get("pid") == pid
                          and e.get("state") == "attached", timeout=30)


def evicted(p, during=None):
    return [e for e in p.of_type("evicted") if during is None or e["during"] == during]


@test
def a_load_announced_gets_its_room_before_it_starts():
    require_root()
    with Memcg(512 * MiB) as cg:
        p = loadexec(5, 64, cg.preexec())
        agent = Agent("--pid", p.pid, "--interval", "1s")
        try:
            assert attached(agent, p.pid), agent.stderr
            p.send("load 200\n")
            loaded = p.wait_type("loaded", 30)
            waited = p.wait_type("waited", 1)
        finally:
            p.kill()
            agent.stop()
        assert loaded, (p.events, p.err)
        assert waited["seen"], f"the agent never counted it: {waited}"
        # 328 MiB in use, 200 to come: at least one 64 MiB entry must go
        assert waited["served"] >= 1, \
            f"room made before the load: {waited['served']} commands ({p.events})"
        assert cg.oom_kills() == 0, "OOM-killed"
        reasons = {e["reason"] for e in agent.of_type("evict")}
        assert reasons <= {"forecast", "inactive", "headroom"}, reasons


@test
def an_announcement_costs_the_announcer_only():
    require_root()
    with ParentMemcg(640 * MiB, 2, "announce") as dom:
        a = loadexec(3, 64, dom.preexec(0))
        b = loadexec(3, 64, dom.preexec(1))
        agent = Agent("--all", "--cgroup", dom.rel, "--interval", "1s")
        try:
            assert attached(agent, a.pid) and attached(agent, b.pid), agent.stderr
            a.send("load 1 %d\n" % (1 << 20))  # announces 1 TiB, takes 1 MiB
            assert a.wait_type("loaded", 30), a.err
            waited = a.wait_type("waited", 1)
        finally:
            a.kill()
            b.kill()
            agent.stop()
        assert len(evicted(a)) == 3, f"the announcer's entries: {a.events}"
        assert not evicted(b), f"the other executor lost {evicted(b)}"
        assert waited["seen"], waited
        pids = {e["pid"] for e in agent.of_type("evict")}
        assert pids == {a.pid}, pids
        assert dom.oom_kills() == 0


@test
def a_stale_announcement_is_ignored():
    require_root()
    with Memcg(512 * MiB) as cg:
        p = loadexec(5, 64, cg.preexec(), "--stale")
        agent = Agent("--pid", p.pid, "--interval", "1s")
        try:
            assert attached(agent, p.pid), agent.stderr
            p.send("load 1 400\n")
            assert p.wait_type("loaded", 30), p.err
            waited = p.wait_type("waited", 1)
        finally:
            p.kill()
            agent.stop()
        assert not waited["seen"] and waited["served"] == 0, waited
        assert not agent.of_type("evict"), agent.of_type("evict")


if __name__ == "__main__":
    sys.exit(main())
