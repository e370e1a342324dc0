#!/usr/bin/env python3
"""The agent's side of busy entries (docs/control-page.md, "Busy
entries"), against executors whose entries are all in use
(tests/helpers/busyexec.py) in a scratch memory cgroup, below --headroom:

- an entry answered busy is not commanded again while it stays active,
  and is commanded as soon as it stops being active (no fixed back-off);
- with nothing else to free the agent says so once, in a cannot_free
  event, instead of commanding the active entries one by one;
- a command held for an active entry does not time out while the entry
  stays active, however long that is beyond --ack-timeout;
- an executor without safe points (busy for whatever is in use) whose
  jobs reuse every cached output can free only between jobs: the agent
  must command there, at once. With a fixed back-off after busy (the agent
  before this contract) it could not, and the third job was OOM-killed.
"""
import json
import os
import queue
import subprocess
import sys
import threading

from rctest import (AGENT, MiB, ROOT, Agent, Memcg, Skip, main,  # noqa: E402
                    py_env, repeats, require_root, test, wait_event)

BUSYEXEC = os.path.join(ROOT, "tests", "helpers", "busyexec.py")
LIMIT = 256 * MiB


class BusyExec:
    def __init__(self, memcg, *args):
        self.proc = subprocess.Popen([sys.executable, BUSYEXEC, *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=memcg.preexec(),
                                     env=py_env(os.path.join(ROOT, "python")))
        self.events = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            ev = json.loads(line)
            self.events.append(ev)
            self.q.put(ev)
        self.q.put(None)

    def wait_type(self, typ, timeout=30.0):
        return wait_event(self.events, self.q, lambda e: e["type"] == typ, timeout)

    def of_type(self, typ):
        return [e for e in self.events if e["type"] == typ]

    def finish(self, timeout=60):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("busyexec still running")


def served(*args, agent_args=()):
    """busyexec with @args under the agent: (its events, the agent)."""
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    with Memcg(LIMIT) as cg:
        ex = BusyExec(cg, *args)
        agent = None
        try:
            ready = ex.wait_type("ready")
            assert ready, ex.proc.stderr.read()
            agent = Agent("--pid", ready["pid"], "--headroom", "64M", "--inactive", "96M",
                          *agent_args)
            rc = ex.finish()
        finally:
            if ex.proc.poll() is None:
                ex.proc.kill()
                ex.proc.wait()
            if agent is not None:
                agent.stop()
        assert rc == 0, f"busyexec exit {rc}: {ex.proc.stderr.read()[-1500:]}"
        assert cg.oom_kills() == 0
    return ex, agent


@test
def a_busy_entry_waits_for_its_end_of_use_and_nothing_left_is_said_once():
    ex, agent = served("--entries", 4, "--mib", 32, "--extra-mib", 64, "--active-s", 5,
                       "--step-s", 1, "--answer", "busy", agent_args=("--interval", "1s"))
    cmds = ex.of_type("cmd")
    busy = [c for c in cmds if c["active"]]
    assert busy, f"no command for an active entry: {agent.events[-10:]}"
    per_entry = {}
    for c in busy:
        per_entry[c["id"]] = per_entry.get(c["id"], 0) + 1
    assert max(per_entry.values()) == 1, \
        f"an entry answered busy was commanded again while still active: {per_entry}"
    # while every entry is in use: said once (again later only once the
    # agent got what it needed in between)
    first = ex.of_type("inactive")[0]
    told = [e for e in agent.of_type("cannot_free") if e["ts_ns"] < first["t_ns"]]
    assert len(told) == 1, agent.of_type("cannot_free")
    cf = told[0]
    assert cf["pid"] == ex.wait_type("ready")["pid"] and cf["why"] in ("busy", "active"), cf
    assert cf["short"] > 0 and cf["wanted"] >= cf["short"], cf
    assert cf["busy_bytes"] + cf["active_bytes"] >= 32 * MiB, cf
    # the first entry to stop being active is commanded after, and freed
    later = [c for c in cmds if c["id"] == first["id"] and c["t_ns"] > first["t_ns"]]
    assert later, f"entry {first['id']} never commanded once inactive: {cmds}"
    evicted = [a for a in ex.of_type("ack") if a["id"] == first["id"] and a["status"] == 1]
    assert evicted, ex.of_type("ack")
    # counted per executor: its summary (and ramcache_executor_commands_total)
    answered = [a for a in ex.of_type("ack") if a["status"] == 3]
    last = agent.of_type("summary")[-1]
    assert last["evict_busy"] == len(answered), (last["evict_busy"], len(answered))
    print(f"# {len(busy)} busy answers for {len(per_entry)} entries; entry "
          f"{first['id']} commanded {(later[0]['t_ns'] - first['t_ns']) / 1e6:.0f} ms "
          f"after it stopped being active")


@test
def a_held_command_does_not_time_out_while_its_entry_is_active():
    ex, agent = served("--entries", 4, "--mib", 32, "--extra-mib", 64, "--active-s", 5,
                       "--step-s", 0.2, "--answer", "hold", agent_args=("--ack-timeout", "1s"))
    held = [c for c in ex.of_type("cmd") if c["active"]]
    assert held, f"no command for an active entry: {agent.events[-10:]}"
    done = {e["seq"]: e for e in agent.of_type("evict_done")}
    for c in held:
        d = done.get(c["seq"])
        assert d and d["status"] == "evicted", (c, d)
    # held past --ack-timeout, and still an eviction, not a timeout
    assert max(done[c["seq"]]["ack_latency_ns"] for c in held) > 1_000_000_000, done
    assert not [d for d in done.values() if d["status"] == "timeout"], done
    bad = agent.of_type("anomaly")
    assert not bad, bad
    print(f"# {len(held)} commands held up to "
          f"{max(done[c['seq']]['ack_latency_ns'] for c in held) / 1e9:.1f} s, "
          f"none timed out (--ack-timeout 1s)")


def doomed_job(agent_args=("--interval", "1s")):
    """Two jobs cache 2 x 176 MiB; the third reads both (all active, its
    commands held) and writes 176 MiB more: 528 MiB in 512, which no
    eviction can make fit. Returns (the agent's events, OOM kills)."""
    with Memcg(512 * MiB) as cg:
        ex = BusyExec(cg, "--jobs", 3, "--mib", 176, "--job-s", 2, "--pause-s", 0.5,
                      "--answer", "hold")
        agent = None
        try:
            ready = ex.wait_type("ready")
            assert ready, ex.proc.stderr.read()
            agent = Agent("--pid", ready["pid"], *agent_args)
            ex.finish(timeout=60)
        finally:
            if ex.proc.poll() is None:
                ex.proc.kill()
                ex.proc.wait()
            if agent is not None:
                agent.stop()
        return agent.events, cg.oom_kills()


@test
def nothing_left_to_free_is_said_before_the_oom_kill():
    """Every entry in use and the job still growing past the limit: the
    agent cannot prevent the kill, but says so (cannot_free, the level at
    least high) before it, every time."""
    require_root()
    told, runs = 0, repeats(4)
    for run in range(runs):
        events, kills = doomed_job()
        oom = [e for e in events if e.get("type") == "oom_kill"]
        assert kills >= 1 and oom, f"run {run}: it fit after all ({kills} kills)"
        kill_ns = oom[0]["ts_ns"]
        cf = [e for e in events if e.get("type") == "cannot_free" and e["ts_ns"] < kill_ns]
        high = [e for e in events if e.get("type") == "pressure"
                and e.get("level") in ("high", "critical") and e.get("ts_ns", 0) < kill_ns]
        assert cf, f"run {run}: no cannot_free before the kill: " + \
            str([e.get("type") for e in events][-30:])
        assert high, f"run {run}: the level never said high before the kill"
        told += 1
    print(f"# cannot_free and a high level before the OOM kill in {told} of {runs} runs")


@test
def busy_answers_do_not_end_in_an_oom_kill_between_jobs():
    ex, agent = served("--jobs", 6, "--mib", 80, "--job-s", 1.5, "--pause-s", 0.5,
                       "--answer", "busy")
    jobs = ex.of_type("job")
    assert len(jobs) == 6, jobs  # and served() checked: 0 OOM kills
    cmds = ex.of_type("cmd")
    busy = [c for c in cmds if c["active"]]
    evicted = [a for a in ex.of_type("ack") if a["status"] == 1]
    assert evicted, cmds
    print(f"# 6 jobs of 80 MiB in 256 MiB: {len(cmds)} commands, {len(busy)} "
          f"answered busy, {len(evicted)} evicted between jobs, "
          f"{len(agent.of_type('cannot_free'))} cannot_free")


main()
