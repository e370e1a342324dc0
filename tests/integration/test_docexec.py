#!/usr/bin/env python3
"""The executor written from docs/control-page.md (tests/helpers/docexec.py,
pure Python) against the real agent, in a scratch memory cgroup.

It caches 24 x 16 MiB in a 256 MiB cgroup without swap and never evicts on
its own: without an agent the cgroup OOM-kills it (shown first, so the
second case can fail), under the agent it is found through its memfd, its
commands are acked, nothing is OOM-killed and its RSS drops.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time

from rctest import (AGENT, MiB, ROOT, Agent, Memcg, Skip, main,  # noqa: E402
                    require_root, test, wait_event)

DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")
LIMIT = 256 * MiB
WORKLOAD = ["--entries", 24, "--size", 16, "--every-ms", 150, "--hold-s", 2]
PYTHON = sys.executable


class DocExec:
    """docexec.py in a memcg (optionally wrapped), its JSON lines read."""

    def __init__(self, memcg, *args, wrap=()):
        argv = [*wrap, PYTHON, DOCEXEC, *map(str, WORKLOAD), *map(str, args)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=memcg.preexec())
        self.events = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.events.append(ev)
            self.q.put(ev)
        self.q.put(None)

    def wait_type(self, typ, timeout=20.0):
        return wait_event(self.events, self.q,
                          lambda ev: ev.get("type") == typ, timeout)

    def wait(self, timeout=120):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"executor still running after {timeout} s")

    def of_type(self, typ):
        return [e for e in self.events if e.get("type") == typ]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")


def served(cg, ex, *agent_args):
    """Run @ex under the agent to the end; the agent's events."""
    ready = ex.wait_type("ready")
    assert ready, ex.proc.stderr.read() if ex.proc.poll() is not None else ""
    agent = Agent("--pid", ready["pid"], "--headroom", "64M", "--inactive",
                  "128M", *agent_args)
    try:
        rc = ex.wait()
    finally:
        ex.kill()
        agent.stop()
    err = ex.proc.stderr.read()
    assert rc == 0, f"executor exit {rc}: {err[-2000:]} {agent.stderr[-5:]}"
    return ready, agent


def check_served(cg, ex, ready, agent):
    """found, commands acked, 0 OOM kills, RSS dropped."""
    att = [e for e in agent.of_type("control") if e["state"] == "attached"]
    assert att, f"page never attached: {agent.of_type('control')} " \
                f"{agent.stderr[-5:]}"
    assert att[0]["discovery"] == "memfd", att[0]
    assert att[0]["path"].startswith(f"/proc/{ready['pid']}/fd/"), att[0]
    done = ex.wait_type("done", timeout=1)
    assert done and done["made"] == 24, done
    assert cg.oom_kills() == 0, "OOM kill in the cgroup"
    assert done["cmds"] >= 1 and done["acks"] == done["cmds"], done
    assert done["evicted"] >= 1 and done["rss_drops"] >= 1, done
    acked = [e for e in agent.of_type("evict_done")
             if e["status"] == "evicted" and e.get("ack_latency_ns", 0) > 0]
    assert acked, agent.events[-20:]
    # the cache held far less than it made: 24 x 16 MiB never fit
    assert done["rss_max"] < LIMIT, done
    return att[0], done


@test
def without_an_agent_the_cache_is_oom_killed():
    require_root()
    with Memcg(LIMIT) as cg:
        ex = DocExec(cg)
        try:
            rc = ex.wait()
        finally:
            ex.kill()
        assert rc == -9, f"expected SIGKILL by the OOM killer, exit {rc}"
        assert cg.oom_kills() >= 1


@test
def document_executor_is_served_by_the_agent():
    require_agent()
    with Memcg(LIMIT) as cg:
        ex = DocExec(cg, "--wait-agent", 20)
        ready, agent = served(cg, ex)
        att, done = check_served(cg, ex, ready, agent)
        assert att["ns_pid"] == ready["pid"], att
        print(f"# {done['cmds']} commands, {done['evicted']} evicted, "
              f"RSS max {done['rss_max'] >> 20} MiB, end "
              f"{done['rss_end'] >> 20} MiB")


@test
def unsealed_page_is_refused_with_an_event():
    """The document requires F_SEAL_SHRINK: without it the agent refuses
    the page, says why in a control event, and posts nothing."""
    require_agent()
    with Memcg(LIMIT) as cg:
        ex = DocExec(cg, "--no-seal", "--entries", 1, "--hold-s", 30)
        try:
            ready = ex.wait_type("ready")
            assert ready, "no ready"
            with Agent("--pid", ready["pid"]) as agent:
                ev = agent.wait_for(lambda e: e.get("type") == "control",
                                    timeout=10)
                assert ev, agent.events[-10:]
                assert ev["state"] == "refused", ev
                assert ev["reason"] == ("not sealed against shrinking "
                                        "(F_SEAL_SHRINK)"), ev
                assert ev["discovery"] == "memfd", ev
                assert ev["path"] == f"/proc/{ready['pid']}/fd", ev
                time.sleep(1.2)  # two more looks: refused once, never attached
                assert [e["state"] for e in agent.of_type("control")] == \
                    ["refused"], agent.of_type("control")
        finally:
            ex.kill()


main()
