"""An executor side per process, and an agent killed under it: how soon
each side the project ships hears of the agent's death, shared by
tests/integration/test_agentdeath.py (the mechanism) and bench/ (the delay
over 20 kills).

Each side prints one line per change of the agent's state: the C library
(tests/helpers/executor, its "agent" events), the ramcache Python module
(an Executor's on_agent callback), the document's Python example (its
"agent STATE NS" lines) and the ComfyUI package (the on_agent callbacks
of the Executor it is served by)."""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from . import HELPERS, ROOT, Agent, Memcg, MiB, wait_event
from .docsrc import example_source

SIDES = ("libramcache", "ramcache (Python)", "the document's example",
         "the ComfyUI package")

PYTHON = sys.executable

PYEXEC = """
import json, os, sys, time
import ramcache
ex = ramcache.Executor()
ex.on_agent.append(lambda st, t: print(json.dumps({"state": st, "t_ns": t}), flush=True))
print(json.dumps({"ready": os.getpid()}), flush=True)
sys.stdin.readline()
"""



class Lines:
    """A child process whose stdout lines are read by a thread, parsed by
    @parse into dicts (None: ignored); in @memcg when given (removed with
    it at stop())."""

    def __init__(self, argv, parse, memcg=None, reads_stdin=True, agent_args=(),
                 env=None):
        self.memcg = memcg
        self.agent_args = agent_args  # the agent's flags for this executor
        self.reads_stdin = reads_stdin
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=memcg.preexec() if memcg else None)
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
        if self.proc.poll() is None and not self.reads_stdin:
            self.proc.kill()
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self.memcg is not None:
            self.memcg.remove()


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
    return Lines([PYTHON, "-c", PYEXEC], json.loads,
                 env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))


def doc_example(path):
    """The example keeps every blob while an agent is alive: in a 256 MiB
    cgroup, where the agent must evict, as a user's would."""
    def parse(line):
        w = line.split()
        if w[0] == "ready":
            return {"ready": int(w[1])}
        if w[0] == "agent":
            return {"state": w[1], "t_ns": int(w[2])}
        return None
    return Lines([PYTHON, path, "100000"], parse, Memcg(256 * MiB), reads_stdin=False,
                 agent_args=("--headroom", "64M", "--inactive", "128M"))


def comfyui_package():
    """comfyui/tests/deathside.py: the package in the stand-in ComfyUI."""
    return Lines([PYTHON, os.path.join(ROOT, "comfyui", "tests", "deathside.py")],
                 json.loads)


def example_path(d):
    """The document's example, written into folder @d."""
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
        agent = Agent("--pid", pid, *ex.agent_args)
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


def start(side, scratch):
    """The executor for @side (one of SIDES); @scratch a folder for the
    document's example."""
    if side == SIDES[0]:
        return c_library()
    if side == SIDES[1]:
        return python_module()
    if side == SIDES[2]:
        return doc_example(example_path(scratch))
    return comfyui_package()
