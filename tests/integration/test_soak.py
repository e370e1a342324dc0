#!/usr/bin/env python3
"""Soak: the demo executor under the agent in a scratch memory cgroup for
SOAK_SECONDS (default 60, 20 in make test-fresh; `make soak` runs 300), prompt after prompt, so
the cache fills and the agent evicts over and over. At the end: no OOM
kill, agent RSS flat after warm-up, every command the agent posted was
answered or reported (evict_done for every evict)."""
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from rctest import (AGENT, DEMO, FRESH, MiB, Agent, Memcg, main,  # noqa: E402
                    require_root, test, wait_page)

# 20 s in the fresh root (make test-fresh): it proves the install there
SECONDS = int(os.environ.get("SOAK_SECONDS", "20" if FRESH else "60"))
LIMIT = 384 * MiB
WORKLOAD = ["--prompts", 100000, "--nodes", 6, "--models", 2,
            "--model-size", "96M", "--output-size", "16M", "--steps", 10,
            "--step-ms", 20]
RSS_SLACK = 2 * MiB


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@test
def soak_demo_under_the_agent():
    require_root()
    for exe in (AGENT, DEMO):
        if not os.access(exe, os.X_OK):
            raise RuntimeError(f"{exe} is not built")
    mdir = tempfile.mkdtemp(prefix="ramcache-test-soak-", dir="/var/tmp")
    agent = demo = None
    try:
        with Memcg(LIMIT) as cg:
            demo = subprocess.Popen(
                [DEMO, "--json", "--policy", "agent", "--wait-agent", "30",
                 *map(str, WORKLOAD), "--model-dir", mdir],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=cg.preexec())
            lines = queue.Queue()
            reader = threading.Thread(
                target=lambda: [lines.put(x) for x in demo.stdout],
                daemon=True)
            reader.start()
            assert wait_page(demo.pid), "no control page"
            agent = Agent("--pid", demo.pid, "--headroom", "64M",
                          "--inactive", "128M", "--interval", "5s")
            start = time.monotonic()
            warm = min(20, SECONDS / 4)
            samples = []
            while time.monotonic() - start < SECONDS:
                time.sleep(1)
                assert demo.poll() is None, (
                    f"demo exited {demo.returncode}: "
                    f"{demo.stderr.read()[-2000:]}")
                assert agent.proc.poll() is None, agent.stderr[-5:]
                if time.monotonic() - start >= warm:
                    samples.append(rss_bytes(agent.proc.pid))
            oom = cg.oom_kills()
            demo.send_signal(signal.SIGINT)
            demo.wait(timeout=60)
            reader.join(timeout=10)
            rc = agent.wait(timeout=30)  # --pid: exits with the demo
            assert rc == 0, (rc, agent.stderr[-5:])
    finally:
        if demo and demo.poll() is None:
            demo.kill()
            demo.wait()
        if agent:
            agent.stop()
        shutil.rmtree(mdir, ignore_errors=True)

    out = []
    while not lines.empty():
        out.append(lines.get())
    events = [json.loads(x) for x in out if x.startswith("{")]
    prompts = [e for e in events if e.get("type") == "demo_prompt"]
    acks = [e for e in events if e.get("type") == "demo_evict" and
            e.get("by") == "agent"]
    posted = {e["seq"]: e for e in agent.of_type("evict") if "seq" in e}
    done = {}
    for e in agent.of_type("evict_done"):
        assert e["seq"] not in done, f"seq {e['seq']} reported twice"
        done[e["seq"]] = e
    statuses = {}
    for e in done.values():
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    growth = max(samples[-3:]) - min(samples[:3]) if samples else 0
    print(f"# {SECONDS} s: {len(prompts)} prompts, {len(posted)} commands "
          f"({statuses}), {len(acks)} answered by the demo, agent RSS "
          f"{min(samples) / MiB:.1f}..{max(samples) / MiB:.1f} MiB "
          f"(growth {growth / 1024:.0f} KiB), memcg OOM kills {oom}")
    assert oom == 0, "OOM kill in the soak cgroup"
    assert not [e for e in agent.of_type("oom_kill")
                if e.get("victim_pid") == demo.pid], "demo OOM-killed"
    assert len(prompts) >= 3, "the demo made no progress"
    assert posted, "the agent never evicted: no pressure cycles"
    missing = sorted(set(posted) - set(done))
    assert not missing, f"commands never answered nor reported: {missing}"
    assert growth < RSS_SLACK, f"agent RSS grew {growth} bytes"


main()
