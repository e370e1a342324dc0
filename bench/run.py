#!/usr/bin/python3
"""ramcache-bpf benchmarks, side by side in one run (`make bench`).

  bench/run.py [--quick] [--out DIR] [--md PATH] [--only SECTIONS]
               [--merge RESULTS]

Sections (all measured in this run; every figure is a ratio against a
baseline of the same run or a distribution):
  overhead   fault-path throughput: no agent / agent tracking another
             process / agent tracking the benchmark itself / a bpftrace
             one-liner / a /proc poller (interleaved), their burst
             detection delay, and each BPF program's cost per run with
             1, 8 and 64 processes tracked (bench/fpbench.c)
  footprint  agent RSS and CPU at idle and under the fault storm; drops
  reaction   on one memory ramp in a scratch memcg: first reclaim -> the
             agent's eviction command; PSI trigger; node-boundary checks
  reaction-vm  the same ramp inside Debian 12's 6.1 kernel with cgroup v2
             (tests/vm/run.sh, QEMU; software emulation where KVM cannot
             run a stock kernel)
  outcomes   the demo workload under a memcg limit (zram swap when free)
             for the classic cache, local, PSI-driven and ramcache-bpf
  eviction   post -> ack and post -> RSS drop (from the outcome runs,
             the ComfyUI package on its stand-in and, when
             RAMCACHE_COMFYUI names a ComfyUI checkout, in real ComfyUI)

RAMCACHE_COMFYUI=/path/to/ComfyUI (a checkout; `sudo make bench
RAMCACHE_COMFYUI=...` passes it on) adds eviction rows measured in that
real ComfyUI: comfyui/tests/real_comfyui.py runs its main.py on CPU with
the package and the agent, comfy_real rounds of about 35 s each. Its
commit is git's when the checkout is a git work tree, else the first line
of DIR/.ramcache-commit or RAMCACHE_COMFYUI_COMMIT (e.g. for a tree from
`git archive`). Without it, or with --quick, those rows say skipped.

--only S1,S2 --merge bench/results.json measures those sections again and
keeps the others from that file (BENCHMARKS.md says which run measured
what). --quick runs every section once on a small workload in seconds, into
build/bench/quick/, so that the harness is tested by `make test`.
Writes results.json and BENCHMARKS.md. Needs root for the memcg and BPF
parts; without root those sections are recorded as skipped.
Stdlib only.
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import queue
import random
import re
import resource
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.environ.get("OUTPUT") or os.path.join(ROOT, "build")
if not os.path.isabs(OUTPUT):
    OUTPUT = os.path.join(ROOT, OUTPUT)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import rctest  # noqa: E402
from rctest import Memcg, Skip, ZramSwap  # noqa: E402

AGENT = os.path.join(OUTPUT, "ramcache-bpf")
DEMO = os.path.join(OUTPUT, "ramcache-demo")
FAULTBENCH = os.path.join(OUTPUT, "bench", "faultbench")
MEMHOG = os.path.join(OUTPUT, "tests", "memhog")
MiB = 1 << 20
PSI_TRIGGER = "some 150000 2000000"  # 150 ms stalled in a 2 s window
TARGET_OVERHEAD = 0.02

FULL = {
    "overhead_rounds": 21, "fault_size": "64M", "fault_rounds": 15,
    "pair_turns": 61, "pair_rounds": 4,
    "bpf_cost_rounds": 30, "tracked_counts": [1, 8, 64],
    "switches": 20000,
    "idle_s": 30.0, "warmup_s": 2.0,
    "reaction_trials": 12, "vm_reaction_trials": 6, "outcome_rounds": 3,
    "zram": True,
    "noswap_rounds": 2,
    "limit": 384 * MiB,
    "workload": ["--prompts", 8, "--nodes", 6, "--models", 2,
                 "--model-size", "96M", "--output-size", "16M",
                 "--steps", 10, "--step-ms", 40],
    "model_size": 96 * MiB, "output_size": 16 * MiB,
    "agent_flags": ["--headroom", "64M", "--inactive", "128M"],
    "timeout": 150,
    # the executor written from docs/control-page.md alone
    "docexec": {"rounds": 3, "limit": 256 * MiB, "entries": 24, "size": 16,
                "every_ms": 100,
                "agent_flags": ["--headroom", "64M", "--inactive", "128M"]},
    "comfy": {"rounds": 3, "limit": 512 * MiB, "prompts": 12, "mib": 64,
              "steps": 8, "step_s": 0.05,
              "agent_flags": ["--headroom", "96M", "--inactive", "192M"]},
    # real ComfyUI (RAMCACHE_COMFYUI): about 35 s a round on 2 cores
    "comfy_real": {"rounds": 3, "limit": "1.5G", "timeout": 600,
                   "agent_flags": ["--headroom", "256M",
                                   "--inactive", "512M"]},
}
QUICK = {
    "overhead_rounds": 1, "fault_size": "4M", "fault_rounds": 5,
    "pair_turns": 3, "pair_rounds": 2,
    "bpf_cost_rounds": 2, "tracked_counts": [1, 8],
    "switches": 2000,
    "idle_s": 1.0, "warmup_s": 0.5,
    "reaction_trials": 1, "vm_reaction_trials": 0, "outcome_rounds": 1,
    "zram": False,
    "noswap_rounds": 1,
    "limit": 160 * MiB,
    "workload": ["--prompts", 4, "--nodes", 4, "--models", 2,
                 "--model-size", "32M", "--output-size", "8M",
                 "--steps", 3, "--step-ms", 10],
    "model_size": 32 * MiB, "output_size": 8 * MiB,
    "agent_flags": ["--headroom", "24M", "--inactive", "48M"],
    "timeout": 60,
    "docexec": {"rounds": 1, "limit": 128 * MiB, "entries": 20, "size": 8,
                "every_ms": 20,
                "agent_flags": ["--headroom", "32M", "--inactive", "64M"]},
    "comfy": {"rounds": 1, "limit": 384 * MiB, "prompts": 10, "mib": 32,
              "steps": 2, "step_s": 0.02,
              "agent_flags": ["--headroom", "48M", "--inactive", "96M"]},
}


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def pct(values, p):
    """Nearest-rank percentile of a list (None when empty)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def dist(values):
    v = [x for x in values if x is not None]
    return {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99),
            "max": max(v) if v else None, "min": min(v) if v else None}


def is_root():
    return os.geteuid() == 0


# ------------------------------------------------------------ processes

class Proc:
    """A child with its JSON lines collected and its rusage at exit."""

    def __init__(self, argv, stdin=False, preexec=None):
        self.argv = [str(a) for a in argv]
        self.p = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True, preexec_fn=preexec)
        self.pid = self.p.pid
        self.events = []
        self.q = queue.Queue()
        self.err = []
        self.rusage = None
        self.rc = None
        self.end_ns = None
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._e = threading.Thread(target=self._read_err, daemon=True)
        self._e.start()

    def _read(self):
        for line in self.p.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["_rx_ns"] = mono_ns()
            self.events.append(ev)
            self.q.put(ev)
        self.q.put(None)

    def _read_err(self):
        for line in self.p.stderr:
            self.err.append(line.rstrip("\n"))

    def wait_type(self, typ, timeout):
        for ev in list(self.events):
            if ev.get("type") == typ:
                return ev
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ev = self.q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                return None
            if ev is None:
                return None
            if ev.get("type") == typ:
                return ev
        return None

    def send(self, line="\n"):
        self.p.stdin.write(line)
        self.p.stdin.flush()

    def wait(self, timeout):
        """Reap with wait4 (for rusage); SIGKILL after @timeout."""
        if self.rc is not None:
            return self.rc
        end = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                break
            if time.monotonic() >= end:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(self.pid, 0)
                break
            time.sleep(0.01)
        self.end_ns = mono_ns()
        self.rusage = ru
        self.rc = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.rc
        self._t.join(timeout=5)
        self._e.join(timeout=5)
        return self.rc

    def stop(self, timeout=10):
        if self.rc is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
        return self.wait(timeout)

    def kill(self):
        if self.rc is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.wait(5)

    def of_type(self, typ):
        return [e for e in self.events if e.get("type") == typ]


def start_agent(pid, *flags):
    a = Proc([AGENT, "--json", "--pid", pid, *flags])
    if not a.wait_type("start", 15):
        a.kill()
        raise RuntimeError("agent did not start: " + " ".join(a.err[-5:]))
    return a


def proc_cpu_rss(pid):
    """(utime+stime seconds, VmRSS bytes) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return cpu, rss


def ru_cpu(ru):
    return ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------ 1. overhead

FPBENCH = os.path.join(OUTPUT, "bench", "fpbench")
EMPTY_BPF = os.path.join(OUTPUT, "bench", "empty.bpf.o")
TRACEFS = "/sys/kernel/tracing"
TARGET_TRACKED_NS = 20  # per program run, above the empty program
TARGET_UNTRACKED_NS = 5
BURST_FAULTS = 2048  # the agent's default --burst-faults

# The peers: the same fault accounting and burst report, by a bpftrace
# one-liner on the same tracepoint and by polling /proc every 100 ms.
BPFTRACE_PROG = (
    'BEGIN { printf("{\\"type\\":\\"ready\\"}\\n"); } '
    "tracepoint:exceptions:page_fault_user /pid == PID/ { @n++; "
    "if (@n == BURST) { printf(\"{\\\"type\\\":\\\"burst\\\"}\\n\"); } }")
POLLER = r"""
import json, sys, time
pid, burst = int(sys.argv[1]), int(sys.argv[2])
def faults():
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    v = s[s.rindex(")") + 2:].split()
    return int(v[7]) + int(v[9])  # minflt + majflt
prev = faults()
print('{"type":"ready"}', flush=True)
while True:
    time.sleep(0.1)
    try:
        n = faults()
    except OSError:
        break
    if n - prev >= burst:
        print(json.dumps({"type": "burst", "faults": n - prev}), flush=True)
    prev = n
"""


class TraceFs:
    """Mount tracefs for bpftrace's tracepoints if nobody did; unmount
    what we mounted."""

    def __init__(self):
        self.mounted = False
        if not os.path.exists(os.path.join(TRACEFS, "events")):
            r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS],
                               capture_output=True, text=True)
            self.mounted = r.returncode == 0

    def close(self):
        if self.mounted:
            subprocess.run(["umount", TRACEFS], capture_output=True)
            self.mounted = False


def start_watcher(mode, pid, other_pid):
    """The process watching faultbench @pid in @mode, ready, or None."""
    if mode == "none":
        return None
    if mode == "empty":
        w = Proc([FPBENCH, "--empty", EMPTY_BPF, "--hold"], stdin=True)
        if not w.wait_type("ready", 30):
            w.kill()
            raise RuntimeError("fpbench --hold did not start: "
                               + " ".join(w.err[-3:]))
        return w
    if mode in ("other", "self"):
        return start_agent(other_pid if mode == "other" else pid,
                           "--no-evict")
    if mode == "bpftrace":
        prog = BPFTRACE_PROG.replace("PID", str(pid)).replace(
            "BURST", str(BURST_FAULTS))
        w = Proc(["bpftrace", "-B", "line", "-e", prog])
    else:
        w = Proc([sys.executable, "-c", POLLER, pid, BURST_FAULTS])
    if not w.wait_type("ready", 60):
        w.kill()
        raise RuntimeError(f"{mode} did not start: " + " ".join(w.err[-3:]))
    return w


def faultbench(cfg, mode, other_pid):
    """One faultbench run watched by @mode: its CPU and wall throughput,
    the watcher's CPU, and how long after the first fault it reported a
    burst (None when it did not)."""
    argv = [FAULTBENCH, "--size", cfg["fault_size"], "--rounds",
            cfg["fault_rounds"], "--wait"]
    fb = Proc(argv, stdin=True)
    w = None
    try:
        if not fb.wait_type("ready", 10):
            raise RuntimeError("faultbench did not start")
        w = start_watcher(mode, fb.pid, other_pid)
        cpu0 = proc_cpu_rss(w.pid)[0] if w else 0
        t0 = time.monotonic()
        fb.send()
        res = fb.wait_type("result", 300)
        wall = time.monotonic() - t0
        burst = "fault_burst" if mode in ("other", "self") else "burst"
        if w and mode not in ("other", "empty"):
            # the benchmark stays until its burst is reported (a poller
            # may be up to 100 ms behind), or half a second
            w.wait_type(burst, 0.5)
        with contextlib.suppress(OSError):
            fb.p.stdin.close()
        fb.wait(30)
        if not res:
            raise RuntimeError("faultbench gave no result: "
                               + " ".join(fb.err[-3:]))
        out = {"pages_per_s": res["pages_per_s"], "pages": res["pages"],
               "pages_per_cpu_s": res["pages_per_cpu_s"]}
        if w:
            hits = [e for e in w.of_type(burst)
                    if mode not in ("other", "self")
                    or e.get("pid") == fb.pid]
            out["detect_ms"] = ((hits[0]["_rx_ns"] - res["t0_ns"]) / 1e6
                                if hits else None)
            if mode == "self":
                # it exits with its target: whole-life CPU from wait4
                w.wait(15)
                cpu1, rss = ru_cpu(w.rusage), None
            elif mode == "empty":
                cpu1, rss = proc_cpu_rss(w.pid)
                with contextlib.suppress(OSError):
                    w.p.stdin.close()
                w.wait(15)
            else:
                cpu1, rss = proc_cpu_rss(w.pid)
                w.stop()
            out["watcher"] = {
                "cpu_s": cpu1 - cpu0, "wall_s": wall,
                "cpu_frac": (cpu1 - cpu0) / wall if wall > 0 else None,
                "maxrss": w.rusage.ru_maxrss * 1024, "rss_end": rss}
            if mode in ("other", "self"):
                sums = w.of_type("summary")
                out["watcher"]["drops"] = max(
                    [s.get("drops", 0) for s in sums] or [0])
                out["watcher"]["faults_seen"] = sum(
                    s.get("faults", 0) for s in sums)
        return out
    finally:
        fb.kill()
        if w:
            w.kill()


def pair_run(cfg, track_other=None):
    """faultbench --pair: two workers fault in turns, the agent tracking
    the first (or, with @track_other, another process: the method's own
    control, both untracked). Per turn pair, first / second for CPU and
    wall time of one pass each."""
    fb = Proc([FAULTBENCH, "--pair", cfg["pair_turns"], "--size",
               cfg["fault_size"], "--rounds", cfg["pair_rounds"]],
              stdin=True)
    agent = None
    try:
        ready = fb.wait_type("ready", 10)
        if not ready:
            raise RuntimeError("faultbench --pair did not start: "
                               + " ".join(fb.err[-3:]))
        agent = start_agent(track_other or ready["pids"][0], "--no-evict")
        time.sleep(0.3)
        fb.send()
        if fb.wait(cfg["timeout"]) != 0:
            raise RuntimeError("faultbench --pair failed: "
                               + " ".join(fb.err[-3:]))
    finally:
        if agent:
            agent.stop()
        fb.kill()
    rows = [e for e in fb.events if e.get("type") == "pair"]
    cpu = [e["cpu_ns"][0] / e["cpu_ns"][1] for e in rows]
    wall = [e["wall_ns"][0] / e["wall_ns"][1] for e in rows]
    return {"turns": len(rows), "pages_per_turn": rows[0]["pages"]
            if rows else 0,
            "ratio": statistics.median(cpu), "ratio_iqr": [pct(cpu, 25),
                                                           pct(cpu, 75)],
            "ratio_wall": statistics.median(wall),
            "ratio_wall_iqr": [pct(wall, 25), pct(wall, 75)],
            "ratios": cpu, "ratios_wall": wall}


def bench_overhead(cfg):
    if not os.access(FAULTBENCH, os.X_OK):
        return {"skipped": f"{FAULTBENCH} is not built"}
    modes = ["none", "empty", "other", "self", "bpftrace", "poll"]
    if not is_root():
        modes = ["none", "poll"]
    else:
        if not shutil.which("bpftrace"):
            modes.remove("bpftrace")
        if not (os.access(FPBENCH, os.X_OK) and os.path.exists(EMPTY_BPF)):
            modes.remove("empty")
    runs = {m: [] for m in modes}
    cpu_runs = {m: [] for m in modes}
    detect = {m: [] for m in modes}
    watchers = {m: [] for m in modes}
    other = Proc([MEMHOG, "--hold", "3600"]) if is_root() else None
    tfs = TraceFs() if "bpftrace" in modes else None
    try:
        for r in range(cfg["overhead_rounds"]):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for m in order:
                res = faultbench(cfg, m, other.pid if other else None)
                runs[m].append(res["pages_per_s"])
                cpu_runs[m].append(res["pages_per_cpu_s"])
                if "watcher" in res:
                    watchers[m].append(res["watcher"])
                    detect[m].append(res.get("detect_ms"))
                log(f"overhead round {r + 1}: {m}: "
                    f"{res['pages_per_s']:.0f} pages/s, "
                    f"{res['pages_per_cpu_s']:.0f} pages/CPU-s")
        pairs = None
        if is_root():
            pairs = {"tracked": pair_run(cfg),
                     "control": pair_run(cfg, other.pid)}
        bpfcost = bpf_cost(cfg) if is_root() else None
    finally:
        if other:
            other.kill()
        if tfs:
            tfs.close()
    none_cpu_ns = 1e9 / statistics.median(cpu_runs["none"])
    out = {"method": (
        f"faultbench maps {cfg['fault_size']}, writes one byte per 4 KiB "
        f"page (THP off for the mapping), unmaps, x{cfg['fault_rounds']}; "
        f"every configuration runs once per round, in rotating order, "
        f"{cfg['overhead_rounds']} rounds; the agent with --no-evict. "
        "Headline: pages per CPU-second of the benchmark itself (user + "
        "system time from getrusage: the fault handler and the BPF "
        "programs on its tracepoints run there); the ratio is the median "
        "over rounds of each round's ratio to that round's no-agent run, "
        "with the spread (IQR) of those ratios. Wall-time throughput is "
        "shown beside it. Peers do the same fault accounting: a bpftrace "
        f"one-liner on page_fault_user counting the benchmark's faults "
        f"and printing at {BURST_FAULTS}, and a poller reading "
        "/proc/PID/stat (minflt + majflt) every 100 ms, reporting a "
        f"burst when {BURST_FAULTS} faults fall between two polls. "
        "Detection delay: from the benchmark's first fault to the "
        "watcher's burst report reaching this harness (the agent's "
        f"fault_burst: {BURST_FAULTS} faults of the target on one CPU "
        "within 100 ms)"),
        "ns_per_fault": none_cpu_ns,
        "pages_per_s": runs, "pages_per_cpu_s": cpu_runs, "ratios": {},
        "detect_ms": {m: dist(v) for m, v in detect.items() if v},
        "watcher_cpu_frac": {
            m: statistics.median(x["cpu_frac"] for x in v)
            for m, v in watchers.items() if v}}
    if not is_root():
        out["skipped_tracked"] = "needs root for the agent and bpftrace"
    for m in modes:
        r_cpu = [x / b for x, b in zip(cpu_runs[m], cpu_runs["none"])]
        r_wall = [x / b for x, b in zip(runs[m], runs["none"])]
        q1, q3 = pct(r_cpu, 25), pct(r_cpu, 75)
        w1, w3 = pct(r_wall, 25), pct(r_wall, 75)
        out["ratios"][m] = {
            "median_cpu": statistics.median(cpu_runs[m]),
            "median_wall": statistics.median(runs[m]),
            "ratio": statistics.median(r_cpu),
            "ratio_iqr": [q1, q3],
            "ratio_wall": statistics.median(r_wall),
            "ratio_wall_iqr": [w1, w3],
            "slowdown": 1 - statistics.median(r_cpu),
            "slowdown_wall": 1 - statistics.median(r_wall),
            "ns_per_fault_added": (1e9 / statistics.median(cpu_runs[m])
                                   - none_cpu_ns),
            "ratios_per_round": r_cpu}
    if pairs:
        # the target: tracked against untracked, the two faulting in
        # turns under one agent (separate runs drift more than 2% apart
        # on a shared machine: the runs above)
        t = dict(pairs["tracked"])
        t["max_slowdown"] = TARGET_OVERHEAD
        t["slowdown"] = t["ratio"] - 1
        t["slowdown_wall"] = t["ratio_wall"] - 1
        t["met"] = t["slowdown"] <= TARGET_OVERHEAD
        t["met_wall"] = t["slowdown_wall"] <= TARGET_OVERHEAD
        t["control"] = pairs["control"]
        t["paired"] = True
        out["target"] = t
    if "self" in out["ratios"] and "other" in out["ratios"]:
        # the same from the separate runs above, round by round
        r_cpu = [x / b for x, b in zip(cpu_runs["self"], cpu_runs["other"])]
        r_wall = [x / b for x, b in zip(runs["self"], runs["other"])]
        t = {"max_slowdown": TARGET_OVERHEAD,
             "ratio": statistics.median(r_cpu),
             "ratio_iqr": [pct(r_cpu, 25), pct(r_cpu, 75)],
             "ratio_wall": statistics.median(r_wall),
             "ratio_wall_iqr": [pct(r_wall, 25), pct(r_wall, 75)]}
        t["slowdown"] = 1 - t["ratio"]
        t["slowdown_wall"] = 1 - t["ratio_wall"]
        t["met"] = t["slowdown"] <= TARGET_OVERHEAD
        t["met_wall"] = t["slowdown_wall"] <= TARGET_OVERHEAD
        out["separate"] = t
        out.setdefault("target", t)
    out["storm_agents"] = watchers.get("self", [])
    out["bpf_cost"] = bpfcost
    return out


def fpbench(args):
    p = subprocess.run([FPBENCH, *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    if p.returncode:
        raise RuntimeError("fpbench failed: " + p.stderr[-500:])
    return json.loads(p.stdout)


def per_run(run, kind, group="progs"):
    """ns per run of the @kind ("fault" or "rss") program of @group
    ("progs", or "beside": the do-nothing programs beside them) in one
    fpbench run, None where it did not run."""
    v = [p for n, p in run.get(group, {}).items()
         if n.startswith(kind + "_")]
    return v[0]["run_time_ns"] / v[0]["runs"] if v and v[0]["runs"] else None


def bpf_cost(cfg):
    """The agent's fault-path programs, per run, by the kernel's BPF
    run-time stats (fpbench), with 1, 8 and 64 processes tracked: the
    benchmark's own faults tracked or not. Do-nothing programs run beside
    them on the same tracepoints, on the very same faults (attached after
    them in one round, before them in the next): what the agent's program
    costs above theirs is what it does, without the call and the stats'
    own clock reads, and without the drift between runs. A control runs
    do-nothing programs beside do-nothing programs: the method's own bias.
    And what a context switch costs with each set loaded, against none."""
    for f in (FPBENCH, EMPTY_BPF):
        if not os.path.exists(f):
            return {"skipped": f"{f} is not built"}
    beside = ["--beside", EMPTY_BPF]
    configs = [("none", ["--none"]), ("empty", ["--empty", EMPTY_BPF]),
               ("control", ["--empty", EMPTY_BPF] + beside)]
    for n in cfg["tracked_counts"]:
        configs.append((f"untracked-{n}", ["--tracked", n] + beside))
        configs.append((f"tracked-{n}", ["--tracked", n, "--self"] + beside))
    size = ["--size", cfg["fault_size"], "--rounds", cfg["fault_rounds"],
            "--switches", cfg["switches"]]
    samples = {name: [] for name, _ in configs}
    for r in range(cfg["bpf_cost_rounds"]):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for name, args in order:
            first = ["--first"] if "--beside" in args and r % 2 else []
            samples[name].append(fpbench(args + first + size))
    floor = {}
    for k in ("fault", "rss"):
        # a program that never ran in a round has no figure
        per = [v for v in (per_run(s, k) for s in samples["empty"])
               if v is not None]
        if per:
            floor[k] = statistics.median(per)
    switch = {name: statistics.median(s["switch_ns"] for s in runs)
              for name, runs in samples.items()}
    rows = {}
    for name, runs in samples.items():
        if name in ("none", "empty"):
            continue
        row = {"tracked": runs[0]["tracked"], "self": runs[0]["self"],
               "control": name == "control",
               "switch_ns": switch[name],
               "switch_ns_added": switch[name] - switch["none"],
               "other_progs": {}}
        for k in ("fault", "rss"):
            per = [v for v in (per_run(s, k) for s in runs) if v is not None]
            cnt = [s["progs"][p]["runs"] for s in runs for p in s["progs"]
                   if p.startswith(k + "_")]
            if not per:
                continue
            # paired within each run: the same faults ran both programs
            diff = [a - b for a, b in ((per_run(s, k),
                                        per_run(s, k, "beside"))
                                       for s in runs)
                    if a is not None and b is not None]
            row[k] = {"ns_per_run": statistics.median(per),
                      "runs": statistics.median(cnt),
                      "above_empty": (statistics.median(diff)
                                      if diff else None),
                      "above_iqr": ([pct(diff, 25), pct(diff, 75)]
                                    if len(diff) > 1 else None)}
        # every other program of the agent's that ran meanwhile (none of
        # them is on a path every process takes: exec, reclaim, kswapd)
        for s in runs:
            for p, v in s["progs"].items():
                if not p.startswith(("fault_", "rss_")):
                    o = row["other_progs"].setdefault(p, [0, 0])
                    o[0] += v["runs"]
                    o[1] += v["run_time_ns"]
        rows[name] = row
    met = {}
    for name, row in rows.items():
        if row["control"]:
            continue
        limit = TARGET_TRACKED_NS if row["self"] else TARGET_UNTRACKED_NS
        met[name] = all(row[k]["above_empty"] is not None
                        and row[k]["above_empty"] <= limit
                        for k in ("fault", "rss") if k in row)
    return {"floor_ns": floor, "rows": rows, "met": met,
            "switch_ns": switch,
            "rounds": cfg["bpf_cost_rounds"],
            "method": (
                "fpbench loads the agent's programs as the agent does "
                "(tp_btf), tracks N sleeping processes (N-1 and the "
                "benchmark's worker for 'tracked'), and the worker faults "
                f"{cfg['fault_size']} x{cfg['fault_rounds']}; do-nothing "
                "programs run beside the agent's on the same tracepoints, "
                "so both run on the very same faults, attached after the "
                "agent's in one round and before them in the next; "
                "BPF_ENABLE_STATS run time / run count of each program over "
                f"that run; {cfg['bpf_cost_rounds']} rounds, configurations "
                "in rotating order. 'above empty' is the median over rounds "
                "of the agent's program's figure less the do-nothing "
                "program's of the same run (the call and the stats' own "
                "clock reads cancel), with the spread (IQR) of those "
                "differences; the control row runs do-nothing programs "
                "beside do-nothing programs, the method's own bias. Run "
                "counts include every other process's faults meanwhile. "
                "Then the worker and a child, pinned to one CPU, pass a "
                f"byte back and forth {cfg['switches']} times over two "
                "pipes: wall time per context switch (syscalls included), "
                "against the same with no program loaded at all")}


# ------------------------------------------------------------ 5. footprint

TARGET_RSS = 8 * MiB
TARGET_IDLE_CPU = 0.001  # of a core
EXECUTOR = os.path.join(OUTPUT, "tests", "executor")
# what a resident page of the agent is, by the mapping it is in
RSS_CLASSES = (
    ("BPF ring buffer and maps", ("anon_inode:bpf",)),
    ("the agent's binary", ("ramcache-bpf",)),
    ("libmicrohttpd and its TLS libraries", (
        "libmicrohttpd", "libgnutls", "libp11-kit", "libnettle",
        "libhogweed", "libgmp", "libunistring", "libidn2", "libtasn1",
        "libffi")),
    ("libbpf, libelf, libz", ("libbpf", "libelf", "libz.")),
    ("libc, libm, ld.so", ("libc.", "libm.", "ld-linux")),
)


def run_ns(pid):
    """CPU time of every thread of @pid (schedstat), in ns."""
    t = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                t += int(f.read().split()[0])
    return t


def rss_breakdown(pid):
    """Resident bytes of @pid by RSS_CLASSES, thread stacks, the rest."""
    sps = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                sps.add(int(f.read().split()[-2], 16))
    out = {}
    name = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                path = line.split()[5] if len(line.split()) > 5 else ""
                name = next((c for c, keys in RSS_CLASSES
                             if any(k in path for k in keys)), None)
                if name is None:
                    name = ("stacks" if path == "[stack]" or any(
                        lo <= sp < hi for sp in sps)
                        else "heap and other anonymous memory"
                        if path in ("", "[heap]") else "other files")
            elif line.startswith("Rss:"):
                out[name] = out.get(name, 0) + int(line.split()[1]) * 1024
    return out


def idle_agent(cfg, executor):
    """The agent with --metrics following a sleeping process (memhog) or
    an executor with a control page (heartbeat every 250 ms), scraped every
    5 s as Prometheus would: CPU of all its threads over idle_s, RSS."""
    if executor:
        tgt = Proc([EXECUTOR, "--entries", 16, "--bytes", 1 << 20],
                   stdin=True)
        if not tgt.wait_type("ready", 10):
            tgt.kill()
            raise RuntimeError("executor did not start: "
                               + " ".join(tgt.err[-3:]))
    else:
        tgt = Proc([MEMHOG, "--hold", "3600"])
    addr = f"127.0.0.1:{free_port()}"
    agent = None
    try:
        agent = start_agent(tgt.pid, "--metrics", addr)
        if executor and not agent.wait_type("control", 10):
            raise RuntimeError("agent did not attach the control page")
        # the loop's first seconds read in what it runs (MCL_ONFAULT)
        time.sleep(cfg["warmup_s"])
        scrape_ok = scrape_metrics(addr)
        c0, t0 = run_ns(agent.pid), mono_ns()
        n0 = len(agent.events)
        end = time.monotonic() + cfg["idle_s"]
        while time.monotonic() < end:
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
            scrape_ok += scrape_metrics(addr)
        c1, t1 = run_ns(agent.pid), mono_ns()
        _, rss = proc_cpu_rss(agent.pid)
        parts = rss_breakdown(agent.pid)
        series = count_series(addr)
        agent.stop()
        # what the kernel told the agent meanwhile: kswapd or reclaim
        # anywhere keeps it busy, reading every 250 ms, for 5 s
        # (user/core/cadence.h)
        told = {}
        for e in agent.events[n0:]:
            if e.get("type") in ("kswapd", "reclaim", "oom_kill",
                                 "pressure"):
                told[e["type"]] = told.get(e["type"], 0) + 1
            if e.get("type") == "summary" and e.get("level") != "ok":
                k = f"summaries at level {e.get('level')}"
                told[k] = told.get(k, 0) + 1
        return {"cpu_frac": (c1 - c0) / (t1 - t0), "rss": rss,
                "rss_parts": parts, "scrapes": scrape_ok, "series": series,
                "kernel_events": told,
                "drops": max([s.get("drops", 0) for s in
                              agent.of_type("summary")] or [0]),
                "seconds": (t1 - t0) / 1e9}
    finally:
        if agent:
            agent.kill()
        tgt.kill()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_metrics(addr):
    import urllib.request
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(f"http://{addr}/metrics",
                                    timeout=5) as r:
            return int(r.status == 200 and bool(r.read()))
    return 0


def count_series(addr):
    """What one scrape adds to Prometheus: samples in all, the fixed part,
    and per executor (ramcache_executor_*, by slot) and per domain
    (ramcache_domain_*, by domain); None if the scrape failed."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{addr}/metrics",
                                    timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    lines = [ln for ln in text.splitlines() if ln and ln[0] != "#"]
    ex = [ln for ln in lines if ln.startswith("ramcache_executor_")]
    dom = [ln for ln in lines if ln.startswith("ramcache_domain_")]
    slots = {m.group(1) for m in map(re.compile(r'slot="(\d+)"').search, ex)
             if m}
    domains = {m.group(1) for m in map(
        re.compile(r'domain="((?:[^"\\]|\\.)*)"').search, dom) if m}
    return {"total": len(lines), "fixed": len(lines) - len(ex) - len(dom),
            "executors": len(slots), "domains": len(domains),
            "per_executor": len(ex) / max(1, len(slots)),
            "per_domain": len(dom) / max(1, len(domains)),
            "bytes": len(text)}


def bench_footprint(cfg, overhead):
    if not is_root():
        return {"skipped": "needs root for the agent"}
    idle = idle_agent(cfg, executor=False)
    idle_ex = idle_agent(cfg, executor=True)
    storm = overhead.get("storm_agents") or []
    out = {"method": (
        f"idle: the agent with --metrics (scraped every 5 s) following a "
        f"sleeping process (no control page: it looks for one every "
        f"0.5 s), and following an executor with a control page (it "
        f"beats the heartbeat every 250 ms), each for {cfg['idle_s']:.0f} "
        f"s after {cfg['warmup_s']} s of warm-up; CPU = run time of all its threads "
        "(/proc/PID/task/*/schedstat) / wall time; RSS = VmRSS (pages "
        "locked as they are used, MCL_ONFAULT), by mapping from "
        "/proc/PID/smaps; storm: the agent tracking faultbench itself "
        "(overhead section), CPU from wait4 over the agent's life "
        "(start-up included) / the benchmark's wall time, RSS = peak "
        "(ru_maxrss), drops from its last summary"),
        "idle": idle, "idle_executor": idle_ex,
        "targets": {"rss": TARGET_RSS, "cpu_frac": TARGET_IDLE_CPU}}
    worst = max(idle, idle_ex, key=lambda x: x["rss"])
    busiest = max(idle, idle_ex, key=lambda x: x["cpu_frac"])
    out["met"] = {"rss": worst["rss"] <= TARGET_RSS,
                  "cpu": busiest["cpu_frac"] <= TARGET_IDLE_CPU}
    if storm:
        out["storm"] = {
            "cpu_frac": statistics.median(a["cpu_frac"] for a in storm),
            "rss": max(a["maxrss"] for a in storm),
            "maxrss": max(a["maxrss"] for a in storm),
            "drops": max(a["drops"] for a in storm),
            "faults_per_s_of_target": None, "runs": len(storm)}
        pages = overhead["ratios"].get("self", {}).get("median_wall")
        out["storm"]["faults_per_s_of_target"] = pages
    return out


# ------------------------------------------------------------ cgroup I/O

def memcg_avail(cg):
    """limit - usage + inactive file, as the demo's local policy sees it."""
    if cg.version == 2:
        limit = cg.read("memory.max").strip()
        limit = 1 << 62 if limit == "max" else int(limit)
        usage = int(cg.read("memory.current"))
        key = "inactive_file"
    else:
        limit = int(cg.read("memory.limit_in_bytes"))
        usage = int(cg.read("memory.usage_in_bytes"))
        key = "total_inactive_file"
    stat = memcg_stat(cg)
    return max(0, limit - usage) + stat.get(key, 0)


def memcg_stat(cg):
    out = {}
    for line in cg.read("memory.stat").splitlines():
        k, _, v = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[k] = int(v)
    return out


def vmstat(key):
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == key:
                return int(v)
    return 0


class PsiWatch:
    """A PSI trigger polled in a thread; the first fire is recorded."""

    def __init__(self, cg):
        self.path = "/proc/pressure/memory"
        if cg.version == 2:
            self.path = os.path.join(cg.path, "memory.pressure")
        self.fires = []
        self.error = None
        self._stop = False
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
            os.write(self.fd, PSI_TRIGGER.encode() + b"\0")
        except OSError as e:
            self.fd = None
            self.error = str(e)
            return
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        p = select.poll()
        p.register(self.fd, select.POLLPRI)
        while not self._stop:
            for _, ev in p.poll(50):
                if ev & select.POLLERR:
                    self.error = "POLLERR"
                    return
                if ev & select.POLLPRI:
                    self.fires.append(mono_ns())

    def close(self):
        self._stop = True
        if self.fd is not None:
            self._t.join(timeout=2)
            os.close(self.fd)


def memcg_swap(cg):
    """Bytes of the memcg's memory in swap now."""
    if cg.version == 2:
        with contextlib.suppress(OSError, ValueError):
            return int(cg.read("memory.swap.current"))
        return 0
    st = memcg_stat(cg)
    return st.get("total_swap", st.get("swap", 0))


class Sampler:
    """Available memory of a memcg every 10 ms, (mono_ns, bytes), and
    the peak of its swap use."""

    def __init__(self, cg):
        self.cg = cg
        self.trace = []
        self.swap_peak = 0
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            with contextlib.suppress(OSError, ValueError):
                self.trace.append((mono_ns(), memcg_avail(self.cg)))
                self.swap_peak = max(self.swap_peak, memcg_swap(self.cg))
            time.sleep(0.01)

    def close(self):
        self._stop = True
        self._t.join(timeout=2)


@contextlib.contextmanager
def scratch_dir():
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="ramcache-bench-", dir="/var/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def gated_demo(cg, mdir, policy, cfg, extra=()):
    """The demo behind a shell that waits for a line on stdin, so the
    agent can track its pid (kept across exec) before anything runs."""
    argv = ["/bin/sh", "-c", 'read x; exec "$@"', "sh", DEMO, "--json",
            "--policy", policy, "--model-dir", mdir, *cfg["workload"],
            *extra]
    return Proc(argv, stdin=True, preexec=cg.preexec())


def demo_done(demo):
    d = demo.of_type("demo_done")
    return d[0] if d else None


# ------------------------------------------------------------ 2. reaction

def bench_reaction(cfg):
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    headroom = cfg["model_size"] + 2 * cfg["output_size"]
    trials = []
    ramp = None
    for t in range(cfg["reaction_trials"]):
        with Memcg(cfg["limit"], swap_limit=0) as cg, scratch_dir() as d:
            psi = PsiWatch(cg)
            # the classic cache (no eviction at all, not even the demo's
            # allocation guard), its cache published for the agent to see
            demo = gated_demo(cg, d, "none", cfg, ["--publish"])
            agent = sampler = None
            try:
                agent = start_agent(demo.pid, "--dry-run",
                                    *cfg["agent_flags"])
                sampler = Sampler(cg)
                t_start = mono_ns()
                demo.send()
                demo.wait(cfg["timeout"])
                t_end = demo.end_ns
            finally:
                demo.kill()
                if sampler:
                    sampler.close()
                psi.close()
                if agent:
                    agent.stop()
            oom = cg.oom_kills()
        rec = [e for e in agent.of_type("reclaim")
               if e.get("pid") == demo.pid]
        t0 = min((e["ts_ns"] - e.get("latency_ns", 0) for e in rec),
                 default=None)
        evs = agent.of_type("evict")
        t_evict = min((e["ts_ns"] for e in evs if "ts_ns" in e),
                      default=None)
        t_psi = min((f for f in psi.fires if f >= t_start), default=None)
        t_oom = min((e["ts_ns"] for e in agent.of_type("oom_kill")
                     if e.get("victim_pid") == demo.pid), default=None)
        if ramp is None and t0 is not None:
            ramp = ramp_record({
                "t_start": t_start, "t_end": t_end, "t_reclaim": t0,
                "t_evict": t_evict, "t_psi": t_psi, "t_oom": t_oom},
                agent, demo.pid, cfg["limit"])
        tr = {"t_start": t_start, "t_end": t_end, "t_reclaim": t0,
              "t_oom": t_oom,
              "reclaims": len(rec), "t_evict": t_evict, "t_psi": t_psi,
              "psi_error": psi.error, "psi_path": psi.path,
              "oom_kills": oom, "demo_rc": demo.rc,
              "trace": sampler.trace if sampler else []}
        trials.append(tr)
        log(f"reaction trial {t + 1}: reclaims {len(rec)}, "
            f"evict {rel_ms(t_evict, t0)} ms, psi {rel_ms(t_psi, t0)} ms, "
            f"rc {demo.rc}, oom {oom}")
    res = {"method": (
        "the demo workload as the classic cache (--policy none --publish: "
        "it evicts nothing but publishes its entries; ramcache-bpf attached "
        f"with --dry-run, so the ramp is the same for every mechanism) in a {cfg['limit'] // MiB} MiB memcg without "
        "swap, until it is OOM-killed or done; t=0 is the start of the "
        "executor's first reclaim stall (BPF ts_ns - latency_ns of its "
        "first reclaim event). ramcache-bpf: ts_ns of its first "
        "eviction command (CLOCK_MONOTONIC when posted; negative = "
        "before any reclaim). PSI: first POLLPRI of the trigger "
        f"'{PSI_TRIGGER}' on "
        + (trials[0]["psi_path"] if trials else "?")
        + (" (cgroup v1: no per-cgroup PSI, so the system-wide trigger "
           "also fires on other processes' stalls on this shared machine; "
           "a fire before the executor's first reclaim is not its own)"
           if rctest.memcg_version() == 1 else "")
        + ". Node check: ComfyUI-style check of available memory "
        "(limit - usage + inactive file, sampled every 10 ms) against "
        f"{headroom // MiB} MiB after each node, node boundaries at "
        "200 evenly spaced phases per trial; a check that would come "
        "after the process ended (OOM-killed) is a miss."),
        "headroom": headroom, "trials": [], "rows": {}, "ramp": ramp}
    for tr in trials:
        res["trials"].append({k: v for k, v in tr.items() if k != "trace"})
    valid = [tr for tr in trials if tr["t_reclaim"] is not None]
    res["trials_with_reclaim"] = len(valid)
    rows = res["rows"]
    rows["ramcache-bpf"] = row_of(
        [tr["t_evict"] - tr["t_reclaim"] for tr in valid
         if tr["t_evict"] is not None],
        len(valid) - sum(tr["t_evict"] is not None for tr in valid))
    rows["oom"] = row_of(
        [tr["t_oom"] - tr["t_reclaim"] for tr in valid
         if tr["t_oom"] is not None],
        sum(tr["t_oom"] is None for tr in valid))
    rows["psi"] = row_of(
        [tr["t_psi"] - tr["t_reclaim"] for tr in valid
         if tr["t_psi"] is not None and tr["t_psi"] <= tr["t_end"]],
        sum(tr["t_psi"] is None or tr["t_psi"] > tr["t_end"]
            for tr in valid))
    for node_s in (1, 10):
        vals, miss = [], 0
        for tr in valid:
            for k in range(200):
                n = node_check(tr, node_s * 1e9, k / 200.0, headroom)
                if n is None:
                    miss += 1
                else:
                    vals.append(n - tr["t_reclaim"])
        rows[f"node-check-{node_s}s"] = row_of(vals, miss)
    return res


VM_RUN = os.path.join(ROOT, "tests", "vm", "run.sh")
VM_RESULT = "ramcache-bench-vm-result:"


def bench_reaction_vm(cfg):
    """The reaction section again, inside the 6.1 VM (cgroup v2)."""
    if not is_root():
        return {"skipped": "needs root (QEMU, memcg, BPF)"}
    if not cfg["vm_reaction_trials"]:
        return {"skipped": "quick mode (the VM suites of `make test` boot "
                "the same kernel)"}
    inner = ("import json, sys; sys.argv = ['run.py']; "
             "sys.path.insert(0, 'bench'); import run; "
             "cfg = dict(run.FULL, reaction_trials="
             f"{cfg['vm_reaction_trials']}); "
             "r = run.bench_reaction(cfg); r['machine'] = run.machine(); "
             f"print({VM_RESULT!r}, json.dumps(r), flush=True)")
    p = subprocess.run([VM_RUN, sys.executable, "-c", inner], cwd=ROOT,
                       env=dict(os.environ, OUTPUT=OUTPUT),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    lines = p.stdout.splitlines()
    for line in lines:
        if line.startswith(VM_RESULT):
            res = json.loads(line[len(VM_RESULT):])
            vm = [x[6:] for x in lines if x.startswith("# vm: ")]
            res["vm"] = vm[0] if vm else "?"
            return res
    return {"skipped": f"the VM run failed (exit {p.returncode}): "
            + " | ".join(lines[-5:])}


RAMP_TYPES = ("rss", "reclaim", "evict", "oom_kill", "summary", "pressure",
              "kswapd")


def ramp_record(times, agent, pid, limit):
    """One trial's agent events (of the executor), for the picture."""
    evs = [{k: v for k, v in e.items() if not k.startswith("_")}
           for e in agent.events if e.get("type") in RAMP_TYPES
           and (e.get("pid") in (pid, None) or e["type"] == "kswapd"
                or e.get("victim_pid") == pid)]
    return dict(times, limit=limit, events=evs)


def outcome_trace(agent, demo, t0_ns, limit):
    """RSS of the executor (decimated), evictions and OOM kills, in
    seconds since the workload started: the outcome picture's data."""
    rss = [((e["ts_ns"] - t0_ns) / 1e9, e["rss"]) for e in
           agent.of_type("rss") if e.get("pid") == demo.pid]
    step = max(1, len(rss) // 400)
    rss = rss[::step] + rss[-1:] if rss else []
    done = {e.get("seq"): e.get("status") for e in
            agent.of_type("evict_done")}
    return {"limit": limit,
            "t_end": ((demo.end_ns or mono_ns()) - t0_ns) / 1e9,
            "rss": [[round(t, 4), b] for t, b in rss],
            "oom": [round((e["ts_ns"] - t0_ns) / 1e9, 4) for e in
                    agent.of_type("oom_kill")
                    if e.get("victim_pid") == demo.pid],
            "evict": [[round((e["ts_ns"] - t0_ns) / 1e9, 4),
                       done.get(e.get("seq"), "")] for e in
                      agent.of_type("evict") if "seq" in e],
            "finished_t": (((demo.end_ns or 0) - t0_ns) / 1e9
                           if demo.rc == 0 else None)}


def rel_ms(t, t0):
    if t is None or t0 is None:
        return None
    return round((t - t0) / 1e6, 2)


def row_of(vals_ns, missed):
    """p50/p99 over every attempt, a miss counting as infinitely late
    ("missed" when the percentile falls on one); n = attempts."""
    ms = sorted(v / 1e6 for v in vals_ns) + [float("inf")] * missed
    d = {"n": len(ms), "hits": len(vals_ns), "missed": missed,
         "missed_frac": missed / len(ms) if ms else None}
    for name, p in (("p50", 50), ("p99", 99)):
        v = pct(ms, p)
        d[name] = "missed" if v == float("inf") else v
    d["max_hit"] = max(ms[:len(vals_ns)]) if vals_ns else None
    return d


def node_check(tr, node_ns, phase, headroom):
    """Time of the first node-boundary check that sees avail < headroom."""
    trace = tr["trace"]
    if not trace:
        return None
    t = tr["t_start"] + phase * node_ns
    i = 0
    while t <= tr["t_end"]:
        while i + 1 < len(trace) and trace[i + 1][0] <= t:
            i += 1
        if trace[i][0] <= t and trace[i][1] < headroom:
            return t
        t += node_ns
    return None


# ------------------------------------------------------------ 4. outcomes

POLICIES = ["unconstrained", "none", "local", "psi", "agent"]


def zram_free():
    with open("/proc/swaps") as f:
        return "zram0" not in f.read()


@contextlib.contextmanager
def maybe_zram(cfg, note):
    if not cfg["zram"]:
        note.append("no zram swap (quick mode)")
        yield False
        return
    end = time.monotonic() + 90
    while not zram_free() and time.monotonic() < end:
        time.sleep(1)
    try:
        z = ZramSwap(1 << 30)
    except Skip as e:
        note.append(f"no zram swap: {e}")
        yield False
        return
    with z:
        yield True


def run_outcome(cfg, policy, swap):
    limit = 8 << 30 if policy == "unconstrained" else cfg["limit"]
    swap_limit = (1 << 30) if swap else 0
    extra = ["--wait-agent", 30] if policy == "agent" else []
    dpolicy = "none" if policy == "unconstrained" else policy
    with Memcg(limit, swap_limit=swap_limit) as cg, scratch_dir() as d:
        oom0 = cg.oom_kills()
        st0 = memcg_stat(cg)
        swpin0 = vmstat("pswpin")
        demo = gated_demo(cg, d, dpolicy, cfg, extra)
        agent = None
        sampler = Sampler(cg)
        try:
            flags = cfg["agent_flags"] if policy == "agent" \
                else ["--no-evict"]
            agent = start_agent(demo.pid, *flags)
            t0 = time.monotonic()
            t0_ns = mono_ns()
            demo.send()
            demo.wait(cfg["timeout"])
            wall = time.monotonic() - t0
        finally:
            demo.kill()
            sampler.close()
            if agent:
                agent.stop()
        st1 = memcg_stat(cg)
        oom = cg.oom_kills() - oom0
        swpin = vmstat("pswpin") - swpin0
    done = demo_done(demo)
    rec = [e for e in agent.of_type("reclaim") if e.get("pid") == demo.pid]
    maj_key = "total_pgmajfault" if "total_pgmajfault" in st1 \
        else "pgmajfault"
    prompts = demo.of_type("demo_prompt")
    evicted = done["bytes_evicted"] if done else sum(
        e.get("bytes_freed", 0) for e in demo.of_type("demo_evict"))
    ack = [e for e in agent.of_type("evict_done")]
    return {
        "policy": policy, "rc": demo.rc, "oom_kills": oom,
        "finished": bool(done) and demo.rc == 0,
        "prompts": len(prompts), "wall_s": wall,
        "elapsed_s": done["elapsed_ms"] / 1000 if done else None,
        "stall_ns": sum(e.get("latency_ns", 0) for e in rec),
        "stalls": len(rec),
        "majfaults": st1.get(maj_key, 0) - st0.get(maj_key, 0),
        "swapins_system": swpin, "swap_peak": sampler.swap_peak,
        "bytes_evicted": evicted,
        "psi_events": done.get("psi_events") if done else None,
        "evict_done": evict_rows(ack),
        "agent_drops": max([s.get("drops", 0) for s in
                            agent.of_type("summary")] or [0]),
        "trace": outcome_trace(agent, demo, t0_ns, limit),
    }


@contextlib.contextmanager
def no_swap():
    yield False


def bench_outcomes(cfg, zram=True):
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    note = []
    runs = []
    rounds = cfg["outcome_rounds"] if zram else cfg["noswap_rounds"]
    with (maybe_zram(cfg, note) if zram else no_swap()) as swap:
        if zram and cfg["zram"] and not swap:
            return {"skipped": "; ".join(note) + " (someone else's test "
                    "held it for 90 s); see the run without swap",
                    "notes": note}
        for r in range(rounds):
            order = POLICIES if r % 2 == 0 else list(reversed(POLICIES))
            for p in order:
                res = run_outcome(cfg, p, swap)
                res["round"] = r
                runs.append(res)
                log(f"outcome ({'zram' if swap else 'no swap'}) round "
                    f"{r + 1}: {p}: rc {res['rc']}, oom "
                    f"{res['oom_kills']}, {res['prompts']} prompts, "
                    f"{res['wall_s']:.1f} s, stall "
                    f"{res['stall_ns'] / 1e6:.0f} ms")
    base = [x["elapsed_s"] for x in runs
            if x["policy"] == "unconstrained" and x["elapsed_s"]]
    base_s = statistics.median(base) if base else None
    rows = {}
    for p in POLICIES:
        rs = [x for x in runs if x["policy"] == p]
        fin = [x["elapsed_s"] for x in rs if x["finished"]]
        rows[p] = {
            "runs": len(rs), "finished": len(fin),
            "oom_kills": sum(x["oom_kills"] for x in rs),
            "stall_ms_median": statistics.median(
                x["stall_ns"] / 1e6 for x in rs),
            "stalls_median": statistics.median(x["stalls"] for x in rs),
            "majfaults_median": statistics.median(
                x["majfaults"] for x in rs),
            "swap_peak_median": statistics.median(
                x["swap_peak"] for x in rs),
            "bytes_evicted_median": statistics.median(
                x["bytes_evicted"] for x in rs),
            "completion_ratio": (statistics.median(fin) / base_s
                                 if fin and base_s else None),
            "completion_range": ([min(fin) / base_s, max(fin) / base_s]
                                 if fin and base_s else None),
            "prompts_median": statistics.median(x["prompts"] for x in rs),
        }
    return {"method": (
        f"demo workload {' '.join(map(str, cfg['workload']))} in a "
        f"{cfg['limit'] // MiB} MiB memcg"
        + (" with 1 GiB of zram swap" if swap else " without swap")
        + f", {rounds} round(s), policies interleaved, "
        "medians; unconstrained = classic cache in an 8 GiB memcg. "
        "Reclaim stall = sum of the executor's direct+memcg reclaim "
        "latencies seen by ramcache-bpf (--no-evict for the other "
        "policies, so every run is traced the same way); major faults = "
        "the memcg's pgmajfault, swap-ins included (cgroup v1 has no "
        "per-memcg swap-in counter, and /proc/vmstat pswpin is shared with "
        "every other process that swaps to the same zram device, so it is "
        "only kept in the JSON); swap used = peak of the memcg's swap "
        "(sampled every 10 ms); completion = demo elapsed time / "
        "unconstrained median, finished runs only, (min-max) over runs: "
        "differences inside the baseline's own spread are noise. PSI policy: demo "
        f"--policy psi, trigger '{PSI_TRIGGER}'"
        + (" on /proc/pressure/memory (system-wide: cgroup v1 has no "
           "per-cgroup PSI)" if rctest.memcg_version() == 1
           else " on the memcg's memory.pressure")),
        "swap": swap, "notes": note, "rows": rows,
        "baseline_s": base_s, "runs": runs}


# ------------------------------------------------------------ 3. eviction

COMFY_CHILD = os.path.join(ROOT, "comfyui", "tests", "e2e_comfy.py")


def served_rounds(cfg, c, name, argv, not_ready, is_done, go=False):
    """@c["rounds"] runs of the executor @argv in a memcg of @c["limit"]
    without swap, served by the agent (@c["agent_flags"]) from its first
    line on (@not_ready(line) says why that line will not do, or None);
    with @go it waits for "go" on its standard input. Each run's exit,
    OOM kills, whether it finished (@is_done: a line saying so) and every
    eviction command's latencies; or {"skipped": why}."""
    runs = []
    for r in range(c["rounds"]):
        with Memcg(c["limit"], swap_limit=0) as cg:
            ex = Proc(argv, stdin=go, preexec=cg.preexec())
            agent = None
            try:
                ready = ex.q.get(timeout=60)
                why = not_ready(ready)
                if why:
                    return {"skipped": f"{why} " + " ".join(ex.err[-3:])}
                agent = start_agent(ex.pid, *c["agent_flags"])
                if go:
                    ex.send("go\n")
                ex.wait(cfg["timeout"])
            finally:
                ex.kill()
                if agent:
                    agent.stop()
            oom = cg.oom_kills()
        done = any(is_done(e) for e in ex.events)
        runs.append({"rc": ex.rc, "oom_kills": oom,
                     "finished": done and ex.rc == 0,
                     "evict_done": evict_rows(agent.of_type("evict_done"))})
        log(f"{name} round {r + 1}: rc {ex.rc}, oom {oom}, "
            f"{len(runs[-1]['evict_done'])} commands")
    return {"runs": runs}


DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")


def bench_docexec(cfg):
    """The Python executor written from docs/control-page.md alone
    (tests/helpers/docexec.py) under the agent in a memcg it outgrows:
    every eviction command's latencies."""
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    c = cfg["docexec"]
    res = served_rounds(
        cfg, c, "docexec",
        [sys.executable, DOCEXEC, "--entries", c["entries"], "--size",
         c["size"], "--every-ms", c["every_ms"], "--hold-s", 1,
         "--wait-agent", 10],
        lambda ready: None if ready and ready.get("type") == "ready"
        else "docexec.py did not start:",
        lambda e: e.get("type") == "done")
    if "runs" in res:
        res["method"] = (
            f"tests/helpers/docexec.py (Python, standard library only, "
            f"written from docs/control-page.md) caching {c['entries']} x "
            f"{c['size']} MiB, one every {c['every_ms']} ms, in a "
            f"{c['limit'] // MiB} MiB memcg without swap, ramcache-bpf "
            f"{' '.join(c['agent_flags'])}, {c['rounds']} round(s); its "
            "loop takes commands every 5 ms and after making an entry")
    return res


def bench_comfy(cfg):
    """The ComfyUI package's stand-in executor (Python) under the agent in
    a memcg it outgrows: every eviction command's latencies."""
    if not os.path.exists(COMFY_CHILD):
        return {"skipped": "comfyui/ (the ComfyUI package and its Python "
                "stand-in executor) is not in this tree"}
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    c = cfg["comfy"]
    # the page as a memfd: the agent finds it in /proc/<pid>/fd
    res = served_rounds(
        cfg, c, "comfyui stand-in",
        [sys.executable, COMFY_CHILD, "--prompts", c["prompts"], "--mib",
         c["mib"], "--steps", c["steps"], "--step-s", c["step_s"],
         "--control", "memfd"],
        lambda ready: None if ready and ready.get("page") else
        "the stand-in has no control page: "
        + str(ready and ready.get("reason")),
        lambda e: bool(e.get("done")), go=True)
    if "runs" in res:
        res["method"] = (
            f"comfyui/tests/e2e_comfy.py (the package on the stand-in "
            f"ComfyUI) caching {c['prompts']} x {c['mib']} MiB in a "
            f"{c['limit'] // MiB} MiB memcg without swap, ramcache-bpf "
            f"{' '.join(c['agent_flags'])}, {c['rounds']} round(s)")
    return res


COMFY_REAL = os.path.join(ROOT, "comfyui", "tests", "real_comfyui.py")


def comfyui_commit(comfy):
    """The checkout's commit id: git's, else DIR/.ramcache-commit or
    RAMCACHE_COMFYUI_COMMIT (None when none says)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        top = subprocess.run(["git", "-C", comfy, "rev-parse",
                              "--show-toplevel", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        lines = top.stdout.split()
        if top.returncode == 0 and len(lines) == 2 and (
                os.path.realpath(lines[0]) == os.path.realpath(comfy)):
            return lines[1]
    with contextlib.suppress(OSError, IndexError):
        with open(os.path.join(comfy, ".ramcache-commit")) as f:
            return f.read().split()[0]
    return os.environ.get("RAMCACHE_COMFYUI_COMMIT") or None


def run_real_comfyui(argv, timeout, logpath):
    """real_comfyui.py with its output in @logpath; past @timeout it gets
    SIGINT (it stops ComfyUI and the agent and removes its cgroups), then
    SIGKILL."""
    with open(logpath, "w") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             env=dict(os.environ, OUTPUT=OUTPUT))
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"real ComfyUI: no result in {timeout} s, stopping it")
            p.send_signal(signal.SIGINT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            return "timeout"


def bench_comfy_real(cfg):
    """The package in a real ComfyUI checkout (RAMCACHE_COMFYUI) under the
    agent, by comfyui/tests/real_comfyui.py: every command's latencies."""
    comfy = os.environ.get("RAMCACHE_COMFYUI")
    if not comfy:
        return {"skipped": "set RAMCACHE_COMFYUI to a ComfyUI checkout"}
    c = cfg.get("comfy_real")
    if not c:
        return {"skipped": "quick mode never runs real ComfyUI"}
    comfy = os.path.abspath(comfy)
    if not os.path.isfile(os.path.join(comfy, "main.py")):
        return {"skipped": f"RAMCACHE_COMFYUI={comfy} is not a ComfyUI "
                "checkout (no main.py)"}
    if not os.path.exists(COMFY_REAL):
        return {"skipped": "comfyui/tests/real_comfyui.py is not in this "
                "tree"}
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    commit = comfyui_commit(comfy)
    runs = []
    meta = {}
    with scratch_dir() as d:
        for r in range(c["rounds"]):
            jpath = os.path.join(d, f"real-{r}.json")
            lpath = os.path.join(d, f"real-{r}.log")
            argv = [sys.executable, COMFY_REAL, "run", "ten", "--comfyui",
                    comfy, "--mode", "agent", "--limit", c["limit"],
                    "--json", jpath,
                    *[f"--agent-arg={f}" for f in c["agent_flags"]]]
            rc = run_real_comfyui(argv, c["timeout"], lpath)
            s = {}
            with contextlib.suppress(OSError, ValueError):
                with open(jpath) as f:
                    s = json.load(f)
            meta = s or meta
            with open(lpath, errors="replace") as f:
                tail = f.read()[-1500:]
            runs.append({
                "rc": rc, "oom_kills": s.get("oom_kills"),
                "prompts": s.get("count"), "prompts_ok": s.get("ok", 0),
                "idle_bytes": s.get("idle_bytes"),
                "limit_bytes": s.get("limit"),
                "evict_done": (s.get("agent") or {}).get("evict_done", []),
                "log_tail": None if rc == 0 else tail})
            log(f"real ComfyUI round {r + 1}: rc {rc}, "
                f"{runs[-1]['prompts_ok']}/{runs[-1]['prompts']} prompts, oom "
                f"{runs[-1]['oom_kills']}, "
                f"{len(runs[-1]['evict_done'])} commands")
    limits = sorted({x["limit_bytes"] // MiB for x in runs
                     if x["limit_bytes"]})
    idles = sorted({x["idle_bytes"] // MiB for x in runs
                    if x["idle_bytes"]})
    short = commit[:8] if commit else None
    what = (f"ComfyUI {meta.get('version') or '?'} (commit "
            f"{short or 'not known: set RAMCACHE_COMFYUI_COMMIT'})")
    method = (
        f"comfyui/tests/real_comfyui.py run ten ran {what}, its own main.py "
        f"--cpu {' '.join(meta.get('args', []))} with the package, in a memcg "
        f"without swap limited to {'/'.join(map(str, limits)) or '?'} MiB "
        f"(idle usage {'/'.join(map(str, idles)) or '?'} MiB); 10 prompts "
        "(EmptyImage 1024x1024 x16 -> ImageInvert -> ImageScale -> "
        "PreviewImage) cache 3840 MiB; ramcache-bpf "
        f"{' '.join(c['agent_flags'])}; {c['rounds']} "
        "round(s). The nodes run on CPU, so the package's safe points "
        "(between nodes) are far apart: a command waits for the node that "
        "is running")
    return {"name": f"ComfyUI {short or meta.get('version') or '?'} "
            "(Python, real)",
            "commit": commit, "version": meta.get("version"),
            "method": method,
            "runs": runs}


def evict_rows(done):
    """What the eviction table reads of the agent's evict_done events."""
    return [{k: e.get(k) for k in ("status", "ack_latency_ns",
                                   "freed_latency_ns", "recv_latency_ns")}
            for e in done]


def latency_rows(done):
    acked = [e for e in done if e.get("ack_latency_ns") is not None]
    statuses = {}
    for e in done:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    return {"commands": len(done), "statuses": statuses,
            "post_to_recv_ms": dist([e["recv_latency_ns"] / 1e6
                                     for e in acked]),
            "post_to_ack_ms": dist([e["ack_latency_ns"] / 1e6
                                    for e in acked]),
            "post_to_rss_drop_ms": dist([e["freed_latency_ns"] / 1e6
                                         for e in done
                                         if e.get("freed_latency_ns")])}

def executor_rows(x, keep):
    """One executor's latency rows from its runs (a bench_* result), with
    its @keep keys and each run's summary; or why it was skipped."""
    if "runs" not in x:
        return {"skipped": x.get("skipped")}
    res = latency_rows([e for r in x["runs"] for e in r["evict_done"]])
    res.update({k: x[k] for k in keep})
    res["runs"] = [{k: v for k, v in r.items() if k != "evict_done"}
                   for r in x["runs"]]
    return res


def bench_eviction(cfg, outcomes, noswap, comfy, real, doc):
    if ("runs" not in outcomes and "runs" not in noswap
            and "runs" not in comfy and "runs" not in real
            and "runs" not in doc):
        return {"skipped": outcomes.get("skipped", "no outcome runs")}
    done = [e for r in outcomes.get("runs", []) + noswap.get("runs", [])
            if r["policy"] == "agent" for e in r["evict_done"]]
    wl = cfg["workload"]
    step_ms = float(wl[wl.index("--step-ms") + 1])
    res = {"method": (
        "every eviction command of the ramcache-bpf outcome runs (both "
        "variants), of the Python executor written from the control page's "
        "document, of the ComfyUI stand-in runs and of the runs in real "
        "ComfyUI (when RAMCACHE_COMFYUI names a checkout: `sudo make bench "
        "RAMCACHE_COMFYUI=/path/to/ComfyUI`): post = issue_ns on "
        "the control page; received = the executor's recv_ns; ack = its "
        "ack_ns; RSS drop = the first rss_stat event (BPF) after which RSS "
        "fell by half the entry's size from its peak since the post"),
        "c_demo": latency_rows(done),
        # one safe-point interval plus 2 ms
        "target_ms": {"c_demo": step_ms + 2.0}}
    res["python_doc"] = executor_rows(doc, ("method",))
    res["comfyui_standin"] = executor_rows(comfy, ("method",))
    res["comfyui_real"] = executor_rows(
        real, ("name", "commit", "version", "method"))
    return res


# ------------------------------------------------------------ report

def fmt_ms(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def fmt_mib(b):
    return "-" if b is None else f"{b / MiB:.0f} MiB"


def outcomes_table(oc, title):
    L = [title, ""]
    if "skipped" in oc:
        L += [f"Skipped: {oc['skipped']}", ""]
    else:
        L += [oc["method"] + ".", ""]
        if oc["notes"]:
            L += ["Notes: " + "; ".join(oc["notes"]) + ".", ""]
        L += ["| policy | finished | OOM kills | reclaim stall ms | "
              "major faults (incl. swap-ins) | swap used (peak) | evicted "
              "| completion vs "
              "unconstrained |", "|---|---|---|---|---|---|---|---|"]
        names = {"unconstrained": "classic cache, no limit (baseline)",
                 "none": "classic cache (no eviction)",
                 "local": "ComfyUI-style local eviction",
                 "psi": "PSI-trigger-driven eviction",
                 "agent": "ramcache-bpf"}
        for k, row in oc["rows"].items():
            comp = ("-" if row["completion_ratio"] is None
                    else f"{row['completion_ratio']:.2f}x "
                    f"({row['completion_range'][0]:.2f}-"
                    f"{row['completion_range'][1]:.2f})")
            if row["finished"] < row["runs"]:
                comp += (f" ({row['runs'] - row['finished']} of "
                         f"{row['runs']} did not finish)")
            L.append(f"| {names[k]} | {row['finished']}/{row['runs']} | "
                     f"{row['oom_kills']} | {fmt_ms(row['stall_ms_median'])}"
                     f" | {row['majfaults_median']:.0f} | "
                     f"{fmt_mib(row['swap_peak_median'])} | "
                     f"{fmt_mib(row['bytes_evicted_median'])} | {comp} |")
        L.append("")
    return L


def report(res):
    m = res["machine"]
    L = ["# Benchmarks", "",
         f"Generated by `{res['command']}` on {res['date']} "
         f"({'quick mode: a smoke run, not a measurement' if res['quick'] else 'full run'}).",
         ""]
    if res.get("merged"):
        mg = res["merged"]
        L[-2] = "S" + "; ".join(
            f"sections {', '.join(r['sections'])} measured by "
            f"`{r['command']}` on {r['date']}" for r in mg["runs"])[1:] + (
            f"; the others are from `{mg['base_command']}` on "
            f"{mg['base_date']} (full run).")
    L += [f"Machine: {m['cpus']} CPUs, {m['mem_gib']:.0f} GiB, kernel "
          f"{m['kernel']}, cgroup v{m['cgroup']}, {m['cpu_model']}; "
          f"load average at start {m['loadavg']}. Shared and noisy: every "
          "figure is a ratio against a baseline of this same run or a "
          "distribution from it.", ""]
    o = res["overhead"]
    L += ["## 1. Fault-path overhead", ""]
    if "skipped" in o:
        L += [f"Skipped: {o['skipped']}", ""]
    else:
        L += [o["method"] + ".", "",
              f"A fault costs **{o['ns_per_fault']:.0f} ns** of CPU on "
              "this machine without any watcher (median of the no-agent "
              "runs), so a ratio here can be read against another "
              "machine's fault cost.", "",
              "| configuration | pages/CPU-s (median) | vs no agent "
              "(median of rounds) | IQR of round ratios | slowdown (CPU) | "
              "ns added per fault | pages/s wall (median) | wall vs no "
              "agent (IQR) | watcher CPU | burst detected after (p50 / "
              "max) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        names = {"none": "no agent", "empty": "do-nothing programs on "
                 "the same tracepoints", "other": "agent tracking another "
                 "process (benchmark untracked)",
                 "self": "agent tracking the benchmark",
                 "bpftrace": "bpftrace one-liner (page_fault_user)",
                 "poll": "poll /proc/PID/stat every 100 ms"}
        for k, r in o["ratios"].items():
            d = o.get("detect_ms", {}).get(k)
            det = "-" if k in ("none", "empty", "other") else (
                "never" if not d or d["n"] == 0 else
                f"{d['p50']:.1f} / {d['max']:.1f} ms")
            cpu = o.get("watcher_cpu_frac", {}).get(k)
            L.append(f"| {names[k]} | {r['median_cpu']:.0f} | "
                     f"{r['ratio']:.3f} | {r['ratio_iqr'][0]:.3f}-"
                     f"{r['ratio_iqr'][1]:.3f} | "
                     f"{r['slowdown'] * 100:+.1f}% | "
                     f"{r['ns_per_fault_added']:+.0f} | "
                     f"{r['median_wall']:.0f} | {r['ratio_wall']:.3f} "
                     f"({r['ratio_wall_iqr'][0]:.3f}-"
                     f"{r['ratio_wall_iqr'][1]:.3f}) | "
                     f"{'-' if cpu is None else f'{cpu * 100:.1f}%'} | "
                     f"{det} |")
        bc = o.get("bpf_cost") or {}
        if "rows" in bc:
            sw = bc["switch_ns"]
            L += ["", "### Per program run, by tracked count", "",
                  bc["method"] + ".", "",
                  "Do-nothing programs, ns per run: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in
                              bc["floor_ns"].items())
                  + " (all of it the tracepoint's call into BPF and the "
                  "stats' own clock reads: this is the floor of any "
                  "program here, so an absolute 20 ns per run cannot be "
                  "reached on this machine; the targets are read above "
                  f"it). Targets: at most {TARGET_TRACKED_NS} ns above "
                  "that for a tracked process's faults, "
                  f"{TARGET_UNTRACKED_NS} ns for an untracked one's. A "
                  f"context switch costs {sw['none']:.0f} ns with no "
                  f"program loaded and {sw['empty']:.0f} ns with the "
                  "do-nothing programs.", "",
                  "| tracked | benchmark | fault: ns/run (above empty) | "
                  "rss_stat: ns/run (above empty) | context switch ns "
                  "(vs no program) | target |",
                  "|---|---|---|---|---|---|"]
            others = {}
            for name, r in bc["rows"].items():
                cells = []
                for k in ("fault", "rss"):
                    c = r.get(k)
                    q = c.get("above_iqr") if c else None
                    cells.append("-" if not c else
                                 f"{c['ns_per_run']:.1f} ("
                                 + ("?" if c["above_empty"] is None else
                                    f"{c['above_empty']:+.1f}")
                                 + ("" if not q else
                                    f", IQR {q[0]:+.1f}..{q[1]:+.1f}")
                                 + ")")
                cells.append(f"{r['switch_ns']:.0f} "
                             f"({r['switch_ns_added']:+.0f})")
                for p, (runs, ns) in r.get("other_progs", {}).items():
                    o = others.setdefault(p, [0, 0])
                    o[0] += runs
                    o[1] += ns
                if r.get("control"):
                    who = ("control: do-nothing beside do-nothing", "-",
                           "(the method's bias)")
                else:
                    who = (str(r["tracked"]),
                           "tracked" if r["self"] else "untracked",
                           "PASS" if bc["met"][name] else "MISSED")
                L.append(f"| {who[0]} | {who[1]} | " + " | ".join(cells)
                         + f" | {who[2]} |")
            L += ["", "No program of the agent's runs on context switches: "
                  "the column above is the ping-pong's own spread. "
                  + ("Other programs of the agent's that ran during these "
                     "runs (all rounds and configurations): "
                     + ", ".join(f"{p} {v[0]} runs, "
                                 f"{v[1] / max(v[0], 1):.0f} ns each"
                                 for p, v in sorted(others.items()))
                     + "." if others else
                     "No other program of the agent's ran during these "
                     "runs.")]
        elif bc:
            L += ["", f"Per-run cost: not measured ({bc.get('skipped')})."]
        if "target" in o:
            t = o["target"]
            L += ["", "A process is recognised by its mm: the fault "
                  "program takes the current task's mm, rss_stat its mm "
                  "argument, and both look it up in an open addressing "
                  "table in the programs' global data, with plain loads; a "
                  "table entry is one cache line holding all either "
                  "program reads of a tracked process (its RSS as last "
                  "reported, the step, how often to read the clock), so "
                  "neither reads the settings' page. An untracked process "
                  "is turned away after one table load and a compare, "
                  "whatever the number of tracked processes, with no "
                  "register saved; a tracked fault adds one increment in "
                  "a per-CPU map looked up with a constant key; no program "
                  "runs on context switches.", "",
                  "The do-nothing configuration is what the kernel charges "
                  "for any program on page_fault_user and rss_stat (the "
                  "tracepoint's call into BPF), before a program does "
                  "anything.", "",
                  target_md(o)]
        L.append("")
    L += footprint_report(res["footprint"])
    L += reaction_md(res["reaction"], "## 2. Reaction latency",
                     picture(res, "BENCHMARKS-ramp.svg", "one trial of the "
                             "reaction ramp: RSS against the limit, the "
                             "first reclaim stall, ramcache-bpf's first "
                             "command, PSI, the OOM kill"))
    L += reaction_md(res.get("reaction_vm", {"skipped": "not run"}),
                     "### 2b. Reaction latency on Debian 12's 6.1 kernel "
                     "(cgroup v2, in QEMU)")
    L += reaction_both(res["reaction"], res.get("reaction_vm", {}),
                       res["machine"])
    e = res["eviction"]
    L += ["## 3. Eviction latency", ""]
    if "skipped" in e:
        L += [f"Skipped: {e['skipped']}", ""]
    else:
        L += [e["method"] + ".", "",
              "| executor | path | n | p50 ms | p99 ms | max ms |",
              "|---|---|---|---|---|---|"]
        cs = e["comfyui_standin"]
        cr = e.get("comfyui_real", {"skipped": "not run (older results)"})
        pd = e.get("python_doc", {"skipped": "not run (older results)"})
        for who, c in (("C demo (ramcache-demo)", e["c_demo"]),
                       ("Python, from the document (docexec.py)", pd),
                       ("ComfyUI stand-in (Python)", cs),
                       (cr.get("name", "ComfyUI (Python, real)"), cr)):
            if "skipped" in c:
                L.append(f"| {who} | - | - | - | - | skipped: "
                         f"{c['skipped']} |")
                continue
            for k, name in (("post_to_recv_ms", "post -> received"),
                            ("post_to_ack_ms", "post -> ack"),
                            ("post_to_rss_drop_ms", "post -> RSS drop")):
                d = c[k]
                L.append(f"| {who} | {name} | {d['n']} | "
                         f"{fmt_ms(d['p50'])} | {fmt_ms(d['p99'])} | "
                         f"{fmt_ms(d['max'])} |")
        L += ["", f"Command statuses: C demo {e['c_demo']['statuses']}"
              + (f", docexec.py {pd['statuses']}"
                 if "statuses" in pd else "")
              + (f", ComfyUI stand-in {cs['statuses']}"
                 if "statuses" in cs else "")
              + (f", {cr['name']} {cr['statuses']}"
                 if "statuses" in cr else "")
              + ". "
              + (f"The C demo's rows are from the outcome runs of "
                 f"{e['c_demo_from']}. " if e.get("c_demo_from") else "")
              + "The demo obeys commands at its safe points: between "
              "nodes, after each sampling step (--step-ms apart), after "
              "every MiB it copies or fills, and at once while it waits on "
              "its \"GPU\" (the command thread wakes it)."]
        if e["c_demo"]["post_to_ack_ms"]["n"] and "target_ms" in e:
            p99 = e["c_demo"]["post_to_ack_ms"]["p99"]
            tgt = e["target_ms"]["c_demo"]
            L += ["", f"Target: C demo post -> ack p99 within one safe-point "
                  f"interval plus 2 ms ({tgt:.0f} ms): {fmt_ms(p99)} ms, "
                  f"**{pass_missed(p99 <= tgt)}**."]
        if "method" in pd:
            L.append(f"Python from the document: {pd['method']}; runs: "
                     + ", ".join(f"rc {r['rc']}, {r['oom_kills']} OOM kills"
                                 for r in pd["runs"]) + ".")
        if "method" in cs:
            L.append(f"ComfyUI stand-in: {cs['method']}; runs: "
                     + ", ".join(f"rc {r['rc']}, {r['oom_kills']} OOM kills"
                                 for r in cs["runs"]) + ".")
        if "method" in cr:
            L.append(f"{cr['name']}: {cr['method']}. Runs: " + "; ".join(
                f"rc {r['rc']}, {r['prompts_ok']}/{r['prompts']} prompts "
                f"done, {r['oom_kills']} OOM kills, "
                f"{r['checks_passed']}/{r['checks']} checks passed"
                + (f" (failed: {', '.join(r['failed_checks'])})"
                   if r["failed_checks"] else "")
                for r in cr["runs"]) + ".")
        L.append("")
    L += outcomes_table(res["outcomes"], "## 4. Outcomes")
    L += picture(res, "BENCHMARKS-outcomes.svg", "the outcome runs of one "
                 "round: RSS of the demo against the limit per policy, "
                 "evictions and OOM kills")
    L += outcomes_table(res["outcomes_noswap"],
                        "## 4b. Outcomes without swap")
    L += picture(res, "BENCHMARKS-outcomes-noswap.svg", "the outcome runs "
                 "without swap: RSS of the demo against the limit per "
                 "policy, evictions and OOM kills")
    L += ["## Targets and misses", ""] + [f"- {n}" for n in res["verdicts"]]
    L.append("")
    return "\n".join(L)


def pass_missed(ok):
    return "PASS" if ok else "MISSED"


def footprint_report(f):
    L = ["## 5. Footprint", ""]
    if "skipped" in f:
        return L + [f"Skipped: {f['skipped']}", ""]
    t = f["targets"]
    L += [f["method"] + ".", "",
          "| state | agent CPU | target | agent RSS | target | "
          "ring-buffer drops |", "|---|---|---|---|---|---|"]
    for name, k in (("idle, following a process without a page",
                     "idle"),
                    ("idle, following an executor (heartbeat)",
                     "idle_executor")):
        d = f[k]
        L.append(f"| {name} | {d['cpu_frac'] * 100:.3f}% of a core | "
                 f"<= {t['cpu_frac'] * 100:.1f}%: "
                 f"**{pass_missed(d['cpu_frac'] <= t['cpu_frac'])}** | "
                 f"{d['rss'] / MiB:.1f} MiB | <= {t['rss'] // MiB} MiB: "
                 f"**{pass_missed(d['rss'] <= t['rss'])}** | "
                 f"{d['drops']} |")
    if "storm" in f:
        s = f["storm"]
        L.append(f"| fault storm (~{s['faults_per_s_of_target']:.0f} "
                 f"faults/s) | {s['cpu_frac'] * 100:.1f}% of a core | - | "
                 f"{fmt_mib(s['rss'])} (peak) | - | {s['drops']} |")
    told = {k: f[k].get("kernel_events") for k in ("idle", "idle_executor")}
    if any(told.values()):
        L += ["", "Kernel events the idle agents saw (kswapd waking or "
              "reclaim anywhere on this shared machine keep the agent "
              "busy, reading every 250 ms, for 5 s): "
              + "; ".join(f"{k}: {v}" for k, v in told.items() if v) + "."]
    n = f["idle_executor"].get("series")
    if n:
        L += ["", f"Prometheus series one scrape adds (following the "
              f"executor, docs/fleet.md): {n['total']} = {n['fixed']} fixed + "
              f"{n['per_executor']:.0f} per executor x {n['executors']} + "
              f"{n['per_domain']:.0f} per domain x {n['domains']}; "
              f"{n['bytes']} bytes."]
    parts = f["idle_executor"].get("rss_parts") or {}
    if parts:
        L += ["", "Where the idle agent's RSS is (following the executor, "
              "KiB resident):", "",
              "| mapping | KiB |", "|---|---|"]
        for name, b in sorted(parts.items(), key=lambda kv: -kv[1]):
            L.append(f"| {name} | {b // 1024} |")
    L.append("")
    return L


def reaction_both(host, vm, m):
    """The two kernels' ramps in one table, mechanism by mechanism."""
    if "rows" not in host or "rows" not in vm:
        return []
    vk = vm.get("vm", "the VM")
    L = ["### 2c. Both kernels side by side", "",
         f"Host: kernel {m['kernel']}, cgroup v{m['cgroup']}, "
         f"{len(host['trials'])} trials; VM: {vk}, {len(vm['trials'])} "
         "trials (software emulation: every step of the ramp is slower "
         "there). Milliseconds from the first reclaim stall; missed: "
         "after the process ended, or never.", "",
         "| mechanism | host p50 | host p99 | host missed | 6.1 VM p50 | "
         "6.1 VM p99 | 6.1 VM missed |", "|---|---|---|---|---|---|---|"]
    for k, name in REACTION_NAMES.items():
        cells = []
        for r in (host, vm):
            row = r["rows"].get(k)
            if not row or not row["n"]:
                cells += ["-", "-", "-"]
                continue
            cells += [fmt_ms(row["p50"]), fmt_ms(row["p99"]),
                      f"{row['missed']}/{row['n']}"]
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    return L + [""]


REACTION_NAMES = {
    "ramcache-bpf": "ramcache-bpf eviction posted",
    "psi": f"PSI trigger `{PSI_TRIGGER}`",
    "node-check-1s": "check after each node, 1 s nodes",
    "node-check-10s": "check after each node, 10 s nodes",
    "oom": "(for scale) the OOM kill; missed = not killed"}


def reaction_md(r, title, pic=()):
    L = [title, ""]
    if "skipped" in r:
        L += [f"Skipped: {r['skipped']}", ""]
    else:
        if "vm" in r:
            L += [f"In the VM ({r['vm']}), with QEMU's software emulation "
                  "where KVM cannot run a stock kernel (so every step of "
                  "the ramp is slower than on the host), the same method:",
                  ""]
        L += [r["method"], ""] + list(pic)
        L += [f"Trials: {len(r['trials'])}, with a reclaim event: "
              f"{r['trials_with_reclaim']}. Milliseconds from the first "
              "reclaim stall (negative: before it); percentiles over all "
              "attempts, a miss counting as infinitely late, so 'missed' "
              "means that percentile never noticed in time. With a dozen "
              "trials, p99 is the worst trial. Node-check attempts are "
              "200 phases per trial.",
              "",
              "| mechanism | p50 ms | p99 ms | attempts | missed (after the "
              "process ended, or never) |", "|---|---|---|---|---|"]
        for k, row in r["rows"].items():
            L.append(f"| {REACTION_NAMES[k]} | {fmt_ms(row['p50'])} | "
                     f"{fmt_ms(row['p99'])} | {row['n']} | "
                     f"{row['missed']} ({row['missed_frac'] * 100:.0f}%) |"
                     if row["n"] else f"| {REACTION_NAMES[k]} | - | - | 0 | - |")
        L.append("")
    return L


def pair_desc(t):
    return (f"{t['slowdown'] * 100:+.1f}% CPU (IQR of turn ratios "
            f"{t['ratio_iqr'][0]:.3f}-{t['ratio_iqr'][1]:.3f}), "
            f"{t['slowdown_wall'] * 100:+.1f}% wall (IQR "
            f"{t['ratio_wall_iqr'][0]:.3f}-{t['ratio_wall_iqr'][1]:.3f})")


def target_md(o):
    t = o["target"]
    if not t.get("paired"):
        return (f"Target: tracked at most 2% slower than untracked (the "
                f"benchmark tracked against the agent tracking another "
                f"process, round by round) — CPU "
                f"**{'PASS' if t['met'] else 'MISSED'}** "
                f"({t['slowdown'] * 100:+.1f}%), wall "
                f"**{'PASS' if t['met_wall'] else 'MISSED'}** "
                f"({t['slowdown_wall'] * 100:+.1f}%).")
    c = t["control"]
    sep = o.get("separate")
    return (f"Target: tracked at most 2% slower than untracked. Separate "
            f"runs drift more than that apart on this shared machine (the "
            f"table above), so it is measured with `faultbench --pair`: two "
            f"workers fault in turns, {t['turns']} turns each of "
            f"{t['pages_per_turn']} pages, the first of each pair of turns "
            f"swapped every time, while one agent tracks the first; each "
            f"worker times its own passes (CPU from getrusage in itself, "
            f"and wall time). Ratio: the median over turn pairs of the "
            f"tracked worker's time over the untracked one's. CPU "
            f"**{'PASS' if t['met'] else 'MISSED'}**, wall "
            f"**{'PASS' if t['met_wall'] else 'MISSED'}**: tracked "
            + pair_desc(t) + ". Control, the same with the agent tracking "
            "another process (both workers untracked): "
            + pair_desc({**c, "slowdown": c["ratio"] - 1,
                         "slowdown_wall": c["ratio_wall"] - 1})
            + " — the method's own bias."
            + ("" if not sep else
               f" From the separate runs of the table, round by round: "
               f"tracked {sep['slowdown'] * 100:+.1f}% CPU, "
               f"{sep['slowdown_wall'] * 100:+.1f}% wall against the agent "
               f"tracking another process (IQR of round ratios "
               f"{sep['ratio_iqr'][0]:.3f}-{sep['ratio_iqr'][1]:.3f})."))


def verdicts(res):
    v = []
    o = res["overhead"]
    if "target" in o:
        t = o["target"]
        q = t["ratio_iqr"]
        none = o["ratios"]["self"]["slowdown"] * 100
        empty = o["ratios"].get("empty", {}).get("slowdown")
        how = ("CPU per pass, tracked and untracked faulting in turns, "
               f"median of {t['turns']} turn pairs" if t.get("paired")
               else "CPU per fault, median of rounds")
        v.append(("PASS" if t["met"] else "MISSED")
                 + f" (end to end, {how}): "
                 f"tracked {t['slowdown'] * 100:+.1f}% against untracked "
                 f"(target <= 2%; IQR of ratios {q[0]:.3f}-{q[1]:.3f}"
                 f"; wall {t['slowdown_wall'] * 100:+.1f}%, "
                 f"{'PASS' if t['met_wall'] else 'MISSED'}"
                 + (f"; control with both untracked "
                    f"{(t['control']['ratio'] - 1) * 100:+.1f}%"
                    if t.get("paired") else "")
                 + f"); separate runs against no "
                 f"agent {none:+.1f}%"
                 + ("" if empty is None else
                    f", of which do-nothing programs on the same "
                    f"tracepoints already cost {empty * 100:+.1f}%")
                 + f"; a fault costs {o['ns_per_fault']:.0f} ns here.")
        bc = o.get("bpf_cost") or {}
        for name, r in (bc.get("rows") or {}).items():
            if r.get("control"):
                continue
            limit = TARGET_TRACKED_NS if r["self"] else TARGET_UNTRACKED_NS
            cost = ", ".join(
                f"{k} {r[k]['above_empty']:+.1f} ns" for k in ("fault", "rss")
                if k in r and r[k]["above_empty"] is not None)
            v.append(("PASS" if bc["met"][name] else "MISSED")
                     + f" (per program run, {r['tracked']} tracked, "
                     f"benchmark {'tracked' if r['self'] else 'untracked'}"
                     f"): {cost} above do-nothing programs "
                     f"(target <= {limit} ns).")
        d = o.get("detect_ms", {})
        if "self" in d and d["self"]["n"]:
            peers = ", ".join(
                f"{k} {d[k]['p50']:.1f} ms" for k in ("bpftrace", "poll")
                if k in d and d[k]["n"])
            v.append(f"Burst detection p50: agent {d['self']['p50']:.1f} ms"
                     + (f"; {peers}" if peers else "") + ".")
    r = res["reaction"]
    if "rows" in r:
        rb, psi = r["rows"]["ramcache-bpf"], r["rows"]["psi"]
        if rb["hits"] == 0:
            v.append("MISSED: ramcache-bpf posted no eviction command "
                     "on the ramp.")
        else:
            v.append(f"ramcache-bpf posted its first command at p50 "
                     f"{fmt_ms(rb['p50'])} ms from the first reclaim "
                     "stall (negative = ahead of reclaim).")
        if psi["hits"] == 0:
            v.append("The PSI trigger never fired before the process "
                     "died on this ramp.")
        elif psi["missed"]:
            v.append(f"The PSI trigger missed {psi['missed']} of "
                     f"{psi['n']} ramps (fired after the OOM kill or "
                     "never).")
        for k in ("node-check-1s", "node-check-10s"):
            nc = r["rows"][k]
            v.append(f"A check after each node ({k[11:]} nodes) noticed "
                     f"too late or never in {nc['missed_frac'] * 100:.0f}%"
                     " of ramps (phases).")
    rv = res.get("reaction_vm", {})
    if "rows" in rv:
        rb = rv["rows"]["ramcache-bpf"]
        v.append(f"On Debian 12's 6.1 kernel (cgroup v2, in the VM), "
                 + (f"ramcache-bpf posted its first command at p50 "
                    f"{fmt_ms(rb['p50'])} ms from the first reclaim stall."
                    if rb["hits"] else
                    "MISSED: ramcache-bpf posted no eviction command on "
                    "the ramp."))
    for oc in (res["outcomes"], res.get("outcomes_noswap", {})):
        if "rows" not in oc:
            continue
        var = "with zram swap" if oc.get("swap") else "without swap"
        a = oc["rows"]["agent"]
        if a["oom_kills"] or a["finished"] < a["runs"]:
            v.append(f"MISSED ({var}): ramcache-bpf runs finished "
                     f"{a['finished']}/{a['runs']} with {a['oom_kills']} "
                     "OOM kills.")
        for p in ("none", "local", "psi"):
            row = oc["rows"][p]
            if row["finished"] < row["runs"]:
                v.append(f"Policy '{p}' lost ({var}): finished "
                         f"{row['finished']}/{row['runs']} runs, "
                         f"{row['oom_kills']} OOM kills.")
        # only against policies that finished: a killed run stalls less
        worse = [p for p in ("local", "psi")
                 if oc["rows"][p]["finished"] == oc["rows"][p]["runs"]
                 and oc["rows"][p]["stall_ms_median"] < a["stall_ms_median"]]
        if worse:
            v.append(f"MISSED ({var}): ramcache-bpf's executor stalled "
                     f"longer in reclaim ({fmt_ms(a['stall_ms_median'])} ms)"
                     f" than with {', '.join(worse)}.")
    f = res.get("footprint", {})
    if "met" in f:
        rss = max(f["idle"]["rss"], f["idle_executor"]["rss"])
        cpu = max(f["idle"]["cpu_frac"], f["idle_executor"]["cpu_frac"])
        v.append(f"{pass_missed(f['met']['rss'])}: idle agent RSS "
                 f"{rss / MiB:.1f} MiB with --metrics (target <= "
                 f"{f['targets']['rss'] // MiB} MiB).")
        v.append(f"{pass_missed(f['met']['cpu'])}: idle agent CPU "
                 f"{cpu * 100:.3f}% of a core (target <= "
                 f"{f['targets']['cpu_frac'] * 100:.1f}%).")
        se = f["idle_executor"].get("series")
        if se:
            v.append(f"Prometheus series per executor: "
                     f"{se['per_executor']:.0f} (from a scrape of the "
                     f"agent following one: {se['fixed']} fixed, "
                     f"{se['per_domain']:.0f} per domain).")
    if not v:
        v.append("No target was measured (sections skipped).")
    ev = res.get("eviction", {})
    if (ev.get("c_demo", {}).get("post_to_ack_ms", {}).get("n")
            and "target_ms" in ev):
        p99 = ev["c_demo"]["post_to_ack_ms"]["p99"]
        tgt = ev["target_ms"]["c_demo"]
        v.append(f"{pass_missed(p99 <= tgt)}: C demo eviction post -> ack "
                 f"p99 {fmt_ms(p99)} ms (target <= {tgt:.0f} ms, one "
                 "safe-point interval plus 2 ms).")
    py = [(who, ev[k]["post_to_ack_ms"]["p99"]) for k, who in (
        ("python_doc", "from the document (docexec.py)"),
        ("comfyui_standin", "ComfyUI stand-in"),
        ("comfyui_real", "real ComfyUI")) if ev.get(k, {}).get(
            "post_to_ack_ms", {}).get("n")]
    if py:
        v.append("Python executors, eviction post -> ack p99 (no target; "
                 "each obeys at its own safe points): "
                 + ", ".join(f"{who} {fmt_ms(p)} ms" for who, p in py)
                 + ".")
    cs = res["eviction"].get("comfyui_standin", {})
    if "skipped" in cs:
        v.append("Not measured: eviction latency of the ComfyUI package's "
                 f"Python stand-in executor ({cs['skipped']}).")
    cr = res["eviction"].get("comfyui_real", {})
    if "skipped" in cr:
        v.append("Not measured: eviction latency of the ComfyUI package in "
                 f"real ComfyUI ({cr['skipped']}).")
    return v


def machine():
    def first(path, key):
        with contextlib.suppress(OSError):
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        return "?"
    mem = first("/proc/meminfo", "MemTotal")
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "mem_gib": int(mem.split()[0]) / (1 << 20)
            if mem != "?" else 0,
            "cpu_model": first("/proc/cpuinfo", "model name"),
            "cgroup": rctest.memcg_version(),
            "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
            "hostname_hash": None}


SECTIONS = ("overhead", "footprint", "reaction", "reaction_vm",
            "outcomes_noswap", "outcomes", "eviction")


def merge_from(res, path, only):
    """Sections that were not run come from the results at @path; the
    eviction section is measured on the outcome runs, so it goes with
    them. res["merged"] says which run measured which section."""
    with open(path) as f:
        old = json.load(f)
    ran = {k.replace("-", "_") for k in only}
    if "outcomes" in ran:
        ran |= {"outcomes_noswap", "eviction"}
    for k in SECTIONS:
        if k not in ran and k in old:
            res[k] = old[k]
    # --only eviction measures the ComfyUI rows again; the C demo's come
    # from the outcome runs, which did not run
    oe, ev = old.get("eviction", {}), res.get("eviction", {})
    if ("eviction" in ran and "outcomes" not in ran and "c_demo" in oe
            and "c_demo" in ev):
        ev["c_demo"] = oe["c_demo"]
        if "target_ms" in oe:
            ev["target_ms"] = oe["target_ms"]
        ev["c_demo_from"] = oe.get("c_demo_from", old.get("date"))
    # an overhead section from before the per-round spread was kept
    # cannot be reported: say so instead of failing
    ov = res.get("overhead", {})
    if "overhead" not in ran and "ratios" in ov and (
            "ns_per_fault" not in ov
            or "ratio_iqr" not in ov.get("target", {"ratio_iqr": 0})):
        res["overhead"] = {"skipped": f"the overhead section in {path} "
                           "is older than this report: measure it again "
                           "(--only overhead)"}
    # the storm row is measured by the overhead section
    if ("footprint" in ran and "overhead" not in ran
            and "storm" in old.get("footprint", {})
            and "storm" not in res["footprint"]):
        res["footprint"]["storm"] = old["footprint"]["storm"]
    om = old.get("merged", {})
    runs = [r for r in om.get("runs", [])
            if not set(r["sections"]) <= ran]
    for r in runs:
        r["sections"] = [k for k in r["sections"] if k not in ran]
    runs.append({"sections": sorted(k for k in SECTIONS if k in ran),
                 "command": res["command"], "date": res["date"]})
    res["merged"] = {"runs": runs,
                     "base_command": om.get("base_command",
                                            old.get("command")),
                     "base_date": om.get("base_date", old.get("date"))}


def draw_pictures(res, outdir):
    """The SVGs beside BENCHMARKS.md, by the report's code."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import pictures
    try:
        return pictures.render(res, outdir)
    except Exception as e:  # a picture is not worth the run's figures
        log(f"pictures not drawn: {e!r}")
        return []


def picture(res, name, alt):
    if name in res.get("pictures", []):
        return [f"![{alt}]({name})", ""]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="directory for results.json and "
                    "BENCHMARKS.md (default build/bench, or "
                    "build/bench/quick with --quick)")
    ap.add_argument("--md", help="write BENCHMARKS.md here instead")
    ap.add_argument("--json", help="write results.json here instead")
    ap.add_argument("--only", default="",
                    help="comma-separated sections to run")
    ap.add_argument("--merge", metavar="RESULTS",
                    help="with --only: take the sections not run from "
                    "this results.json (a full run's), so one section can "
                    "be measured again without the rest")
    ap.add_argument("--trials", type=int, help="reaction trials and "
                    "outcome rounds (fewer: e.g. to redraw the pictures)")
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.trials:
        cfg.update(reaction_trials=args.trials, outcome_rounds=args.trials,
                   noswap_rounds=args.trials,
                   comfy=dict(cfg["comfy"], rounds=args.trials))
        if "comfy_real" in cfg:
            cfg["comfy_real"] = dict(cfg["comfy_real"], rounds=args.trials)
    out = args.out or os.path.join(OUTPUT, "bench",
                                   "quick" if args.quick else "")
    os.makedirs(out, exist_ok=True)
    only = set(filter(None, args.only.split(",")))

    def want(s):
        return not only or s in only

    t0 = time.monotonic()
    res = {"quick": args.quick,
           "command": " ".join(shlex.quote(a) for a in
                               ["bench/run.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%d %H:%M UTC"),
           "machine": machine(), "config": {
               k: v for k, v in cfg.items()}}
    if os.environ.get("RAMCACHE_BENCH_CMD"):
        res["command"] = os.environ["RAMCACHE_BENCH_CMD"]
    skipped = {"skipped": "not selected (--only)"}
    res["overhead"] = bench_overhead(cfg) if want("overhead") else skipped
    res["footprint"] = (bench_footprint(cfg, res["overhead"])
                        if want("footprint") else skipped)
    res["reaction"] = bench_reaction(cfg) if want("reaction") else skipped
    res["reaction_vm"] = (bench_reaction_vm(cfg) if want("reaction-vm")
                          else skipped)
    # zram last: it is shared with other tests, which may hold it a while
    res["outcomes_noswap"] = (bench_outcomes(cfg, zram=False)
                              if want("outcomes") and cfg["zram"]
                              else {"skipped": "quick mode runs one variant"
                                    if args.quick else "not selected"})
    doc = (bench_docexec(cfg) if want("eviction") or want("outcomes")
           else skipped)
    comfy = (bench_comfy(cfg) if want("eviction") or want("outcomes")
             else skipped)
    real = (bench_comfy_real(cfg) if want("eviction") or want("outcomes")
            else skipped)
    res["outcomes"] = bench_outcomes(cfg) if want("outcomes") else skipped
    res["eviction"] = bench_eviction(cfg, res["outcomes"],
                                     res["outcomes_noswap"], comfy, real,
                                     doc)
    if args.merge and only:
        merge_from(res, args.merge, only)
    res["verdicts"] = verdicts(res)
    res["seconds"] = time.monotonic() - t0
    jpath = args.json or os.path.join(out, "results.json")
    mpath = args.md or os.path.join(out, "BENCHMARKS.md")
    res["pictures"] = draw_pictures(res, os.path.dirname(
        os.path.abspath(mpath)))
    with open(jpath, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(mpath, "w") as f:
        f.write(report(res))
    log(f"wrote {jpath} and {mpath} in {res['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    random.seed(1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
