#!/usr/bin/env python3
"""End to end: the real agent (build/ramcache-bpf) watching a stand-in
ComfyUI process in a scratch memory cgroup. Skips only when the agent is not
built or does not take --headroom; needs root."""
import json
import os
import signal
import subprocess
import sys
import time

import env
from env import MiB
from rctest import AGENT, Agent, Memcg, Skip, main, require_root, test

CHILD = os.path.join(env.HERE, "e2e_comfy.py")


def agent_finds_memfd():
    """True when the built agent finds memfd pages by pid (memfd discovery);
    older agents look only for /dev/shm/ramcache-<pid>."""
    r = subprocess.run([AGENT, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=10)
    return "memfd" in r.stdout


def control_mode():
    return "memfd" if agent_finds_memfd() else "file"


def require_agent():
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    r = subprocess.run([AGENT, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=10)
    if "--headroom" not in r.stdout:
        raise Skip(f"{AGENT} does not support --headroom yet")
    require_root()


class Child:
    """e2e_comfy.py in the memcg; its JSON lines parsed."""

    def __init__(self, cg, *args):
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, *map(str, args)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=cg.preexec(), env=dict(os.environ))
        self.lines = []
        first = self.read()
        assert first and first.get("ready"), (first, self.stderr())
        assert first["page"], f"no control page in the child: {first['reason']}"
        self.pid = first["pid"]
        self.page = first["page"]

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            return None
        ev = json.loads(line)
        self.lines.append(ev)
        return ev

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=300):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self.read()
            if ev is None or ev.get("done"):
                break
        rc = self.proc.wait(timeout=max(1, end - time.monotonic()))
        return rc

    def stderr(self):
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read()

    def kill(self):
        """Stop the child and remove its page, even after an OOM kill."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(f"/dev/shm/ramcache-{self.pid}")
        except FileNotFoundError:
            pass


@test
def fake_agent_policy_keeps_a_memcg_alive():
    """The same workload with a Python stand-in for the agent's policy: the
    cross-process path (page, futex wake, acks with RSS freed) without BPF."""
    require_root()
    from fakeagent import FakeAgent
    with Memcg(512 * MiB, swap_limit=0) as cg:
        child = Child(cg, "--prompts", 12, "--mib", 64, "--steps", 4, "--step-s", 0.02)
        fa = FakeAgent(child.page)
        fa.start_heartbeat()
        try:
            child.go()
            acks, asked = [], {}
            while child.proc.poll() is None:
                used = int(cg.read("memory.current" if cg.version == 2
                                   else "memory.usage_in_bytes"))
                last = acks[-1] if acks else None
                if used > 512 * MiB - 192 * MiB and (last is None or fa.ack(last)):
                    old = sorted((e for e in fa.entries().values()
                                  if not e["flags"] & 1 and e["bytes"] > 0
                                  and e["id"] not in asked),
                                 key=lambda e: e["last_use_ns"])
                    if old:
                        asked[old[0]["id"]] = old[0]["bytes"]
                        acks.append(fa.post(old[0]["id"], reason=2))
                time.sleep(0.005)
            rc = child.finish()
            assert rc == 0, (rc, child.lines, child.stderr())
            assert cg.oom_kills() == 0
            got = [fa.wait_ack(s, 2) for s in acks]
            assert got and all(a and a["status"] == 1 for a in got), got
            assert sum(a["bytes_freed"] for a in got) >= sum(asked.values()) // 2, \
                (got, asked)
        finally:
            fa.close()
            child.kill()


@test
def agent_evicts_inactive_entries_before_the_oom_killer():
    require_agent()
    # 12 prompts x 64 MiB of cached tensors would need ~800 MiB: the limit is
    # 512 MiB without swap, so only the agent's evictions keep it alive.
    with Memcg(512 * MiB, swap_limit=0) as cg:
        child = Child(cg, "--prompts", 12, "--mib", 64, "--steps", 8, "--step-s", 0.05,
                      "--control", control_mode())
        try:
            with Agent("--pid", child.pid, "--headroom", "96M", "--inactive", "192M") as ag:
                child.go()
                rc = child.finish()
                done = child.lines[-1]
                assert rc == 0 and done.get("done"), (rc, child.lines, child.stderr())
                prompts = [ev for ev in child.lines if "prompt" in ev]
                assert len(prompts) == 12 and all(ev["ok"] for ev in prompts), prompts
                assert cg.oom_kills() == 0
                evicts = [e for e in ag.of_type("evict") if e.get("pid") == child.pid]
                assert evicts, ag.events[-20:]
                assert ag.wait_type("evict_done", timeout=5), ag.events[-20:]
                assert done["evicted"] >= 1 and done["freed"] > 0, done
        finally:
            child.kill()


@test
def comfyui_keeps_running_when_the_agent_is_killed():
    require_agent()
    with Memcg(1024 * MiB, swap_limit=0) as cg:
        child = Child(cg, "--prompts", 4, "--mib", 16, "--steps", 20, "--step-s", 0.1,
                      "--control", control_mode())
        try:
            ag = Agent("--pid", child.pid, "--headroom", "64M", "--inactive", "128M")
            try:
                child.go()
                first = child.read()
                assert first and first.get("ok"), (first, child.stderr())
                assert first["attached"], "the agent never attached"
                ag.proc.send_signal(signal.SIGKILL)  # mid-prompt: prompt 1 runs now
            finally:
                ag.stop()
            rc = child.finish()
            done = child.lines[-1]
            assert rc == 0 and done.get("done"), (rc, child.lines, child.stderr())
            assert all(ev["ok"] for ev in child.lines if "prompt" in ev), child.lines
            assert not done["attached"]
        finally:
            child.kill()


if __name__ == "__main__":
    main()
