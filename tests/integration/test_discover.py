#!/usr/bin/env python3
"""How --all finds executors: the uprobe on memfd_create and the scan.

Executors here are docexec (an executor written from the docs), so the
page they make passes every check the agent makes before following one.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rctest import (AGENT, ROOT, Agent, Skip, main,  # noqa: E402
                    require_root, test)

DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")


def docexec(env=None, hold=20):
    return subprocess.Popen(
        [sys.executable, DOCEXEC, "--entries", "2", "--size", "1",
         "--hold-s", str(hold)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env)


def attached(agent, pid, timeout=10):
    return agent.wait_for(lambda e: e.get("type") == "target"
                          and e.get("pid") == pid
                          and e.get("state") == "attached", timeout)


def agent_probes(pid):
    """The uprobes and uretprobes process @pid has attached (bpftool)."""
    out = subprocess.run(["bpftool", "perf", "show", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [e for e in json.loads(out)
            if e.get("pid") == pid and "probe" in e.get("fd_type", "")]


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")


@test
def all_probes_memfd_create_at_entry_only():
    """--all puts one uprobe on memfd_create and no uretprobe (a uretprobe
    costs every memfd_create on the machine a second trap, whatever the
    name), and an executor started after the agent is still found by it."""
    require_agent()
    agent = Agent("--all", "--no-evict", "--interval", "10s")
    ex = None
    try:
        assert agent.wait_type("start", timeout=60), agent.stderr
        probes = agent_probes(agent.proc.pid)
        kinds = sorted(p["fd_type"] for p in probes)
        assert kinds and set(kinds) == {"uprobe"}, probes
        ex = docexec()
        ev = attached(agent, ex.pid)
        assert ev and ev["discovery"] == "uprobe", (ev, agent.stderr)
    finally:
        if ex:
            ex.kill()
            ex.wait()
        agent.stop()


if __name__ == "__main__":
    main()
