#!/usr/bin/env python3
"""End to end tests of build/ramcache-demo in scratch memory cgroups.

The workload caches ~670 MiB (2 models of 96 MiB, 16 MiB node outputs,
8 prompts) in a 384 MiB cgroup without swap: the classic cache must be
OOM-killed, the local policy and the agent must get it through.
"""
import mmap
import os
import signal
import struct
import subprocess
import time

from rctest import (AGENT, DEMO, MiB, Agent, Demo, Memcg, Skip,  # noqa: E402
                    main, require_demo, require_root, scratch_dir, test,
                    wait_page)

LIMIT = 384 * MiB
WORKLOAD = ["--prompts", 8, "--nodes", 6, "--models", 2, "--model-size",
            "96M", "--output-size", "16M", "--steps", 10, "--step-ms", 20]


def model_dir():
    return scratch_dir("demo-")


def check_cleaned(demo, mdir):
    assert not demo.control_path(), "control page still open"
    left = [n for n in os.listdir("/dev/shm") if str(demo.proc.pid) in n]
    assert not left, f"left in /dev/shm: {left}"
    assert os.listdir(mdir) == [], f"model files left: {os.listdir(mdir)}"


# ------------------------------------------------------------ no cgroup

@test
def usage_errors_exit_2():
    require_demo()
    for bad in (["--policy", "lru"], ["--prompts", "0"], ["--nodes", "1"],
                ["--output-size", "12X"], ["--frobnicate"], ["extra"]):
        p = subprocess.run([DEMO, *bad], capture_output=True, text=True)
        assert p.returncode == 2, f"{bad}: exit {p.returncode}"
        assert "ramcache-demo:" in p.stderr, p.stderr
    p = subprocess.run([DEMO, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--policy" in p.stdout
    p = subprocess.run([DEMO, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("ramcache-demo ")


@test
def classic_cache_bookkeeping_without_limit():
    """--policy none: every output computed once is kept; hits are reused."""
    require_demo()
    with model_dir() as d:
        demo = Demo("--policy", "none", "--prompts", 6, "--nodes", 6,
                    "--models", 2, "--model-size", "8M", "--output-size",
                    "4M", "--steps", 3, "--step-ms", 0, mdir=d)
        assert demo.wait() == 0, demo.err
        done = demo.done()
        prompts = demo.of_type("demo_prompt")
        assert [p["prompt"] for p in prompts] == list(range(1, 7))
        assert done["prompts"] == 6 and done["evicted"] == 0
        assert done["model_loads"] == 2
        assert done["computed"] == sum(p["computed"] for p in prompts)
        assert done["hits"] == sum(p["hits"] for p in prompts)
        assert done["hits"] >= 1, "changing one input should reuse the rest"
        last = prompts[-1]
        assert last["cached_bytes"] == (2 * 8 + done["computed"] * 4) * MiB
        assert last["entries"] == 2 + done["computed"]
        # anonymous memory really held: at least what is cached
        assert last["rss_anon"] >= last["cached_bytes"]
        assert os.listdir(d) == []


@test
def interrupted_demo_cleans_up():
    require_demo()
    with model_dir() as d:
        demo = Demo("--policy", "agent", "--wait-agent", 30, mdir=d)
        path = wait_page(demo.proc.pid)
        for _ in range(200):
            if len(os.listdir(d)) == 2:
                break
            time.sleep(0.05)
        assert path, "no control page"
        demo.proc.send_signal(signal.SIGINT)
        rc = demo.wait(timeout=30)
        assert rc == 128 + signal.SIGINT, rc
        assert demo.done()["interrupted"] is True
        check_cleaned(demo, d)


# ------------------------------------------------------------ in a memcg

@test
def classic_cache_is_oom_killed():
    require_root()
    require_demo()
    with Memcg(LIMIT) as cg, model_dir() as d:
        demo = Demo("--policy", "none", *WORKLOAD, memcg=cg, mdir=d)
        rc = demo.wait()
        assert rc == -signal.SIGKILL, f"exit {rc}, expected SIGKILL"
        assert cg.oom_kills() >= 1, "no OOM kill in the memcg"
        assert not demo.of_type("demo_done")


@test
def local_policy_finishes():
    require_root()
    require_demo()
    with Memcg(LIMIT) as cg, model_dir() as d:
        demo = Demo("--policy", "local", *WORKLOAD, memcg=cg, mdir=d)
        rc = demo.wait()
        assert rc == 0, f"exit {rc}: {demo.err[-2000:]}"
        assert cg.oom_kills() == 0
        done = demo.done()
        assert done["prompts"] == 8
        assert done["local_evictions"] >= 1 and done["acks"] == 0
        ev = demo.of_type("demo_evict")
        assert len(ev) == done["evicted"]
        assert all(e["by"] == "local" for e in ev)
        # freed for real: the process' anonymous RSS shrank by that much
        assert sum(e["bytes_freed"] for e in ev) == done["bytes_evicted"]
        assert done["bytes_evicted"] >= done["evicted"] * 8 * MiB
        check_cleaned(demo, d)


MAGIC = 0x314c544343524152


class ControlPage:
    """The agent's side of the control page, enough to post commands."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDWR)  # the memfd behind /proc/<pid>/fd/<n>
        try:
            # the memfd exists before its header: the executor sizes it,
            # fills it and stores the magic last, as an agent must wait
            end = time.monotonic() + 10
            while os.fstat(fd).st_size == 0 and time.monotonic() < end:
                time.sleep(0.01)
            self.m = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        while self.magic() != MAGIC and time.monotonic() < end:
            time.sleep(0.01)
        (magic, version, _, _, self.max_entries, self.ring, esz, csz, asz,
         _, _, _, self.eoff, self.coff, self.aoff) = struct.unpack_from(
            "<QIIQIIIIIIIIQQQ", self.m, 0)
        assert magic == MAGIC, f"no page published: magic {magic:#x}"
        assert version == 1, f"page version {version}"
        assert (esz, csz, asz) == (96, 32, 48)
        self.seq = 0
        self.acks_read = 0

    def magic(self):
        return struct.unpack_from("<Q", self.m, 0)[0]

    def beat(self):
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        struct.pack_into("<QI", self.m, 192, now, os.getpid())

    def generation(self):
        return struct.unpack_from("<Q", self.m, 144)[0]

    def entries(self):
        for _ in range(100):
            seq1, n = struct.unpack_from("<II", self.m, 136)
            out = []
            for i in range(n):
                eid, nbytes, _, gen, _, flags = struct.unpack_from(
                    "<QQQQQI", self.m, self.eoff + 96 * i)
                label = self.m[self.eoff + 96 * i + 48:
                               self.eoff + 96 * i + 96]
                out.append({"id": eid, "bytes": nbytes, "gen": gen,
                            "flags": flags,
                            "label": label.rstrip(b"\0").decode()})
            if seq1 % 2 == 0 and struct.unpack_from(
                    "<I", self.m, 136)[0] == seq1:
                return out
            time.sleep(0.001)
        raise AssertionError("entry table never stable")

    def post(self, entry_id):
        self.seq += 1
        slot = self.coff + 32 * ((self.seq - 1) % self.ring)
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        struct.pack_into("<Q", self.m, slot, 0)
        struct.pack_into("<QQI", self.m, slot + 8, entry_id, now, 1)
        struct.pack_into("<Q", self.m, slot, self.seq)
        struct.pack_into("<Q", self.m, 224, self.seq)  # cmd_head
        fut = struct.unpack_from("<I", self.m, 232)[0]
        struct.pack_into("<I", self.m, 232, (fut + 1) & 0xffffffff)
        return self.seq

    def acks(self):
        head = struct.unpack_from("<Q", self.m, 160)[0]
        out = []
        while self.acks_read < head:
            self.acks_read += 1
            slot = self.aoff + 48 * ((self.acks_read - 1) % self.ring)
            seq, eid, nbytes, recv, ack, status = struct.unpack_from(
                "<QQQQQI", self.m, slot)
            out.append({"seq": seq, "id": eid, "bytes": nbytes,
                        "status": status, "latency_ns": ack - recv})
        return out

    def close(self):
        self.m.close()


@test
def executor_answers_commands():
    """Posted by hand: unknown -> NOT_FOUND, inactive -> EVICTED, freed."""
    require_demo()
    with model_dir() as d:
        demo = Demo("--policy", "agent", "--wait-agent", 30, "--prompts", 40,
                    "--model-size", "8M", "--output-size", "8M",
                    "--steps", 5, "--step-ms", 20, mdir=d)
        page = None
        try:
            wait_page(demo.proc.pid)
            page = ControlPage(demo.control_path())
            page.beat()
            # prompts 3 and 4 run on the other model: nothing of prompt 1
            # can be busy then
            victim = None
            end = time.monotonic() + 30
            while victim is None and time.monotonic() < end:
                page.beat()
                if page.generation() >= 3:
                    for e in page.entries():
                        if e["label"].endswith("@p1") and e["flags"] == 0:
                            victim = e
                time.sleep(0.02)
            assert victim, "no inactive output of prompt 1 published"
            s_unknown = page.post(1 << 60)
            s_victim = page.post(victim["id"])
            got = {}
            end = time.monotonic() + 10
            while len(got) < 2 and time.monotonic() < end:
                page.beat()
                for a in page.acks():
                    got[a["seq"]] = a
                time.sleep(0.02)
            assert got[s_unknown]["status"] == 2, got  # NOT_FOUND
            assert got[s_victim]["status"] == 1, got  # EVICTED
            assert got[s_victim]["bytes"] >= 4 * MiB, got
            assert all(e["id"] != victim["id"] for e in page.entries())
        finally:
            if page:
                page.close()
            demo.proc.send_signal(signal.SIGINT)
            demo.wait(timeout=30)
        ev = [e for e in demo.of_type("demo_evict") if e["by"] == "agent"]
        assert {e["status"] for e in ev} >= {"not_found", "evicted"}, ev
        check_cleaned(demo, d)


@test
def agent_loss_falls_back_to_local():
    """An agent that stops beating: the demo evicts on its own and finishes."""
    require_root()
    require_demo()
    with Memcg(LIMIT) as cg, model_dir() as d:
        demo = Demo("--policy", "agent", "--wait-agent", 30, *WORKLOAD,
                    memcg=cg, mdir=d)
        page = None
        try:
            wait_page(demo.proc.pid)
            page = ControlPage(demo.control_path())
            # alive until the demo has seen it (a slow machine takes long
            # to load the models), then silent; no commands
            demo.follow_stderr()
            end = time.monotonic() + 60
            while not demo.said("agent attached") and time.monotonic() < end:
                page.beat()
                time.sleep(0.05)
            rc = demo.wait()
        finally:
            if page:
                page.close()
            demo.kill()
        assert rc == 0, f"exit {rc}: {demo.err[-2000:]}"
        assert cg.oom_kills() == 0
        assert "agent heartbeat lost" in demo.err, demo.err[-2000:]
        done = demo.done()
        assert done["prompts"] == 8 and done["acks"] == 0
        assert done["local_evictions"] >= 1, done
        check_cleaned(demo, d)


@test
def demo_with_agent_finishes():
    require_root()
    require_demo()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    with Memcg(LIMIT) as cg, model_dir() as d:
        demo = Demo("--policy", "agent", "--wait-agent", 30, *WORKLOAD,
                    memcg=cg, mdir=d)
        agent = None
        try:
            wait_page(demo.proc.pid)
            assert os.path.exists(demo.control_path()), "no control page"
            agent = Agent("--pid", demo.proc.pid, "--headroom", "64M",
                          "--inactive", "128M")
            rc = demo.wait()
        finally:
            demo.kill()
            if agent:
                agent.stop()
        assert rc == 0, f"exit {rc}: {demo.err[-2000:]}"
        assert cg.oom_kills() == 0
        done = demo.done()
        assert done["prompts"] == 8
        assert done["acks_evicted"] >= 1, done
        acked = [e for e in agent.of_type("evict_done")
                 if e["status"] == "evicted" and e["ack_latency_ns"] > 0]
        assert acked, f"no evict_done with a latency: {agent.events[-20:]}"
        # only the demo's: other processes on the machine may be OOM-killed
        assert not [e for e in agent.of_type("oom_kill")
                    if e.get("victim_pid") == demo.proc.pid]
        check_cleaned(demo, d)


if __name__ == "__main__":
    main()
