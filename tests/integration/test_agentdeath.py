#!/usr/bin/env python3
"""An agent killed with SIGKILL is noticed at once by every executor side
the project ships: the C library (tests/helpers/executor, sleeping in
ramcache_wait for up to 1 s at a time), the ramcache Python module (its
Executor's on_agent callback), the document's own Python example (which
polls agent_lock every 5 ms) and the ComfyUI package (its listener thread,
sleeping in page.wait for up to 250 ms at a time).

What is asserted is the mechanism, never a time: each says "died", which
only agent_lock can tell (the kernel marked it OWNER_DIED as the agent
exited); a heartbeat timeout would say "silent", 1.5 s later. The delay
from the SIGKILL to each executor's notice is printed (and measured over
20 kills per executor in bench/, BENCHMARKS.md).

The agent is then started again: the executor sees it come back (a new
lock) and the old one's death is history.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

from docsrc import example_source  # noqa: E402
from rctest import (AGENT, HELPERS, ROOT, Agent, Skip, main,  # noqa: E402
                    require_root, test, wait_event)

KILLS = int(os.environ.get("RAMCACHE_DEATH_KILLS", "3"))
PYTHON = sys.executable

PYEXEC = """
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import ramcache
ex = ramcache.Executor()
ex.on_agent.append(lambda st, t: print(json.dumps({"state": st, "t_ns": t}), flush=True))
print(json.dumps({"ready": os.getpid()}), flush=True)
sys.stdin.readline()
"""

COMFY = """
import json, os, sys
sys.path[:0] = [os.path.join(sys.argv[1], "comfyui", "tests")]
os.environ.pop("RAMCACHE_CONTROL", None)
import env
pkg = env.load_package()
bridge = pkg.bridge.BRIDGE
w = env.worker("RAM_PRESSURE", ram=1.0, ram_inactive=0)
page = bridge.page
wait, state = page.wait, [None]

def watched(ms):  # the listener's own wait, reported as it returns
    cmd = wait(ms)
    st = page.agent_state()
    if st != state[0]:
        state[0] = st
        print(json.dumps({"state": st, "t_ns": time.monotonic_ns()}), flush=True)
    return cmd

import time
page.wait = watched
print(json.dumps({"ready": os.getpid()}), flush=True)
sys.stdin.readline()
w.stop()
bridge.close()
"""


class Lines:
    """A child process whose stdout lines are read by a thread, parsed by
    @parse into dicts (None: ignored)."""

    def __init__(self, argv, parse):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.parse = parse
        self.seen = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            ev = self.parse(line)
            if ev is not None:
                self.seen.append(ev)
                self.q.put(ev)
        self.q.put(None)

    def wait(self, pred, timeout=20.0):
        return wait_event(self.seen, self.q, pred, timeout)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def c_library():
    def parse(line):
        ev = json.loads(line)
        if ev.get("type") == "ready":
            return {"ready": ev["pid"]}
        if ev.get("type") == "agent":
            return {"state": ev["state"], "t_ns": ev["t_ns"]}
        return None
    return Lines([os.path.join(HELPERS, "executor"), "--entries", "4", "--bytes",
                  str(1 << 20), "--wait-ms", "1000"], parse)


def python_module():
    return Lines([PYTHON, "-c", PYEXEC, ROOT], json.loads)


def doc_example(path):
    def parse(line):
        w = line.split()
        if w[0] == "ready":
            return {"ready": int(w[1])}
        if w[0] == "agent":
            return {"state": w[1], "t_ns": int(w[2])}
        return None
    return Lines([PYTHON, path, "100000"], parse)


def comfyui_package():
    return Lines([PYTHON, "-c", COMFY, ROOT], json.loads)


def example_path(d):
    path = os.path.join(d, "example.py")
    with open(path, "w") as f:
        f.write(example_source())
    return path


def kill_and_watch(ex, pid, kills):
    """Start the agent for @pid, wait until @ex says alive, SIGKILL it,
    wait for @ex's next state: [(state, delay ns)] over @kills rounds."""
    out = []
    for _ in range(kills):
        n = len(ex.seen)
        agent = Agent("--pid", pid)
        try:
            alive = ex.wait(lambda e: e.get("state") == "alive" and ex.seen.index(e) >= n)
            assert alive, f"never attached: {ex.seen[-3:]} {agent.stderr[-5:]}"
            time.sleep(0.3)  # a few heartbeats
            n = len(ex.seen)
            t0 = time.monotonic_ns()
            agent.proc.send_signal(signal.SIGKILL)
            gone = ex.wait(lambda e: "state" in e and e["state"] != "alive"
                           and ex.seen.index(e) >= n, timeout=5)
        finally:
            agent.stop()
        assert gone, f"the agent's death went unnoticed: {ex.seen[-3:]}"
        out.append((gone["state"], gone["t_ns"] - t0))
    return out


def check(name, rounds):
    states = [s for s, _ in rounds]
    ms = sorted(d / 1e6 for _, d in rounds)
    print(f"# {name}: {len(rounds)} SIGKILLs, noticed after "
          f"{', '.join(f'{m:.1f}' for m in ms)} ms")
    assert states == ["died"] * len(rounds), \
        f"{name}: {states}: not told by agent_lock (a heartbeat timeout says silent)"


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")


def run(name, make):
    require_agent()
    ex = make()
    try:
        ready = ex.wait(lambda e: "ready" in e)
        assert ready, ex.proc.stderr.read() if ex.proc.poll() is not None else "no ready"
        check(name, kill_and_watch(ex, ready["ready"], KILLS))
    finally:
        ex.stop()


@test
def the_c_library_notices_a_killed_agent_at_once():
    run("libramcache", c_library)


@test
def the_python_module_notices_a_killed_agent_at_once():
    run("ramcache (Python)", python_module)


@test
def the_documents_example_notices_a_killed_agent_at_once():
    d = tempfile.mkdtemp(prefix="ramcache-test-death-")
    try:
        run("the document's example", lambda: doc_example(example_path(d)))
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)


@test
def the_comfyui_package_notices_a_killed_agent_at_once():
    run("the ComfyUI package", comfyui_package)


main()
