#!/usr/bin/env python3
"""Every way a page ends is told as an end, never as a protocol anomaly
(docs/control-page.md, "How a page ends"): an executor that closes its
page and lives on (closed), one that exits without closing it (exited,
status 3), one killed with SIGKILL (killed, signal 9), one the OOM killer
takes (killed, signal 9, oom_kill), and one that closes its page and exits
at once, as the ComfyUI package does at exit (closed or exited, whichever
the agent sees first). Each ending runs RAMCACHE_ENDING_RUNS times (20)
under one agent (--all, scoped to a scratch cgroup); not one anomaly may
come of them.
"""
import atexit
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from rctest import (AGENT, MiB, ROOT, Agent, ParentMemcg, Skip, main,  # noqa: E402
                    py_env, require_root, test)

RUNS = int(os.environ.get("RAMCACHE_ENDING_RUNS", "20"))
LIMIT = 256 * MiB
# One process forks the executors (a Python start each would take seconds
# on a loaded machine); each makes its page, then ends as it is told.
LAUNCHER = """
import os, signal, sys, threading
from ramcache.page import Page

def executor(r):
    page = Page(None, 16, 8)
    page.publish(1, 1 << 20, 0, 1, 0, "one")
    os.write(1, b"ready %d\\n" % os.getpid())  # one write: children share it
    how = os.read(r, 64).decode().strip()
    if how == "close":
        page.close()
        os.write(1, b"closed %d\\n" % os.getpid())
        os.read(r, 64)
    elif how == "exit":
        os._exit(3)
    elif how == "close-exit":
        page.close()
        os._exit(0)
    elif how == "oom":
        hog = []
        while True:  # until the cgroup's OOM killer takes it
            hog.append(bytearray(b"x" * (16 << 20)))
    os._exit(0)

def reap():  # as any parent: the agent may find its children reaped
    while True:
        try:
            os.wait()
        except ChildProcessError:
            threading.Event().wait(0.05)

threading.Thread(target=reap, daemon=True).start()
pipes = {}
for line in sys.stdin:
    word, arg = line.split()
    if word == "spawn":
        for _ in range(int(arg)):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(w)
                try:
                    executor(r)
                finally:
                    os._exit(1)
            os.close(r)
            pipes[pid] = w
    else:
        os.write(pipes[int(word)], (arg + "\\n").encode())
"""


class Launcher:
    """The forking executor maker, in the scratch cgroup."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", LAUNCHER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=py_env(os.path.join(ROOT, "python")),
                                     preexec_fn=_dom.preexec(0))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def say(self, *words):
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()

    def expect(self, word, n, timeout=60):
        """The pids of the next @n lines "@word PID"."""
        pids = []
        end = time.monotonic() + timeout
        while len(pids) < n:
            line = self.lines.get(timeout=max(0.1, end - time.monotonic()))
            assert line and line[0] == word, (line, self.proc.stderr.read()
                                              if line is None else "")
            pids.append(int(line[1]))
        return pids

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_agent = None
_dom = None
_anomalies = []


def setup():
    """One agent for every case, following what runs in a scratch cgroup."""
    global _agent, _dom
    if _agent is None:
        require_root()
        if not os.access(AGENT, os.X_OK):
            raise Skip(f"{AGENT} is not built")
        _dom = ParentMemcg(LIMIT, 1, "endings")
        # on a pipe: the OOM case makes thousands of reclaim lines, more
        # than a reader on a busy machine takes in time; the agent drops
        # those and holds the ends this waits for (emit/outstream.c)
        _agent = Agent("--all", "--cgroup", _dom.rel, "--headroom", "16M",
                       "--inactive", "24M")
        assert _agent.wait_type("start", timeout=30), _agent.stderr[-5:]
    return _agent


def control(agent, pid, state, timeout=15.0):
    return agent.wait_for(lambda e: e.get("type") == "control" and e.get("pid") == pid
                          and e.get("state") == state, timeout)


def one_ending(how, want):
    """@how for RUNS executors at once (the agent sees them end together,
    as it would a crowd): [dropped events]; each reason in @want."""
    agent = setup()
    t0 = time.monotonic()
    la = Launcher()
    try:
        la.say("spawn", RUNS)
        pids = la.expect("ready", RUNS)
        for pid in pids:
            att = control(agent, pid, "attached")
            assert att, f"never attached: {agent.of_type('control')[-3:]}"
        for pid in pids:
            if how == "sigkill":
                os.kill(pid, signal.SIGKILL)
            else:
                la.say(pid, how)
        if how == "close":
            assert sorted(la.expect("closed", RUNS)) == sorted(pids)
        drops = []
        for pid in pids:
            drop = control(agent, pid, "dropped", timeout=60)
            assert drop, f"{how}: no dropped event: {agent.of_type('control')[-3:]}"
            assert drop["reason"] in want, f"{how}: {drop}"
            drops.append(drop)
    finally:
        la.stop()
        for pid in pids if "pids" in locals() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)  # a late anomaly would be out by now
    bad = agent.of_type("anomaly")
    assert not bad, f"anomalies: {bad[:3]}"
    print(f"# {how}: {RUNS} pages ended in {time.monotonic() - t0:.1f} s, reasons "
          f"{sorted(set(d['reason'] for d in drops))}, 0 anomalies")
    return drops


@test
def a_page_closed_by_a_live_executor_is_closed():
    for d in one_ending("close", ("closed",)):
        assert d["message"] == "page was removed or replaced", d


@test
def an_executor_that_exits_ends_its_page_as_exited_with_its_status():
    drops = one_ending("exit", ("exited",))
    assert all(d.get("status", 3) == 3 for d in drops), drops
    # one message however the end was noticed (the exit first, or the page)
    assert {d["message"] for d in drops} == {"the executor exited"}, drops
    # reaped at once by its parent: the agent reads the zombie's stat, or
    # the pidfd's exit code (Linux 6.15); before, the status may be unknown
    print(f"# exit: status 3 told for {sum('status' in d for d in drops)} of {len(drops)}")


@test
def an_executor_killed_with_sigkill_is_killed():
    """Killed, signal 9; "exited" without a status only where the agent
    could not read how it ended (reaped before it looked, on a kernel
    whose pidfd does not keep the exit code: before 6.15)."""
    drops = one_ending("sigkill", ("killed", "exited"))
    for d in drops:
        if d["reason"] == "killed":
            assert d["signal"] == 9 and not d.get("oom_kill"), d
            assert d["message"] == "the executor was killed", d
        else:
            assert "status" not in d, d
    print(f"# sigkill: {sum(d['reason'] == 'killed' for d in drops)} of "
          f"{len(drops)} told as killed")


@test
def an_executor_the_oom_killer_takes_is_killed_by_it():
    drops = one_ending("oom", ("killed", "exited"))
    killed = [d for d in drops if d["reason"] == "killed"]
    assert killed and all(d["signal"] == 9 for d in killed), drops
    assert any(d.get("oom_kill") for d in killed), drops
    assert _dom.oom_kills() >= RUNS


@test
def closing_the_page_and_exiting_at_once_is_an_end_too():
    one_ending("close-exit", ("closed", "exited"))


def cleanup():
    if _agent is not None:
        _agent.stop()
    if _dom is not None:
        _dom.remove()


atexit.register(cleanup)
main()
