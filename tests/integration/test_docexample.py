#!/usr/bin/env python3
"""The complete Python executor printed in docs/control-page.md ("A
complete executor"), taken from the document as it is and run against the
real agent in a scratch memory cgroup.

Its 24 blobs of 16 MiB (384 MiB) do not fit in the 256 MiB cgroup; it keeps
every blob while an agent is alive, so only the agent's commands keep it
alive: it must be found, served and never OOM-killed.
"""
import os
import queue
import subprocess
import sys
import tempfile
import threading

from rctest.docsrc import example_source  # noqa: E402
from rctest import (AGENT, MiB, Agent, Memcg, Skip, main,  # noqa: E402
                    require_root, test, wait_event)

LIMIT = 256 * MiB


class Example:
    """The example in @memcg; its lines ("ready PID", "agent STATE NS")
    read by a thread."""

    def __init__(self, memcg, path, *args):
        self.proc = subprocess.Popen([sys.executable, path, *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=memcg.preexec())
        self.lines = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            words = line.split()
            self.lines.append(words)
            self.q.put(words)
        self.q.put(None)

    def wait_line(self, pred, timeout=20.0):
        return wait_event(self.lines, self.q, pred, timeout)

    def finish(self, timeout=120):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"example still running after {timeout} s")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")


@test
def the_example_is_taken_from_the_document_whole():
    src = example_source()
    compile(src, "example.py", "exec")
    for needle in ("memfd_create", "F_SEAL_SHRINK", "cast(\"Q\")", "236 // 4",
                   "LOCK_OWNER_DIED", "held.append", "page.close()"):
        assert needle in src, needle


@test
def the_example_is_served_by_the_agent_and_never_oom_killed():
    require_agent()
    d = tempfile.mkdtemp(prefix="ramcache-test-docexample-")
    path = os.path.join(d, "example.py")
    with open(path, "w") as f:
        f.write(example_source())
    try:
        with Memcg(LIMIT) as cg:
            ex = Example(cg, path, 24)
            agent = None
            try:
                ready = ex.wait_line(lambda w: w[0] == "ready")
                assert ready, ex.proc.stderr.read()
                agent = Agent("--pid", ready[1], "--headroom", "48M", "--inactive", "96M")
                rc = ex.finish()
                err = ex.proc.stderr.read()
            finally:
                ex.kill()
                if agent is not None:
                    agent.stop()
            assert rc == 0, f"example exit {rc}: {err[-1500:]} {agent.stderr[-5:]}"
            assert cg.oom_kills() == 0, "OOM kill in the cgroup"
        states = [w[1] for w in ex.lines if w[0] == "agent"]
        assert "alive" in states, ex.lines
        att = [e for e in agent.of_type("control") if e["state"] == "attached"]
        assert att and att[0]["discovery"] == "memfd", agent.of_type("control")
        done = [e for e in agent.of_type("evict_done") if e["status"] == "evicted"]
        assert len(done) >= 8, [e["status"] for e in agent.of_type("evict_done")]
        print(f"# {len(done)} evictions acked, agent states seen: {states}")
    finally:
        os.unlink(path)
        os.rmdir(d)


main()
