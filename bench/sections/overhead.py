"""Section "overhead": fault-path throughput with and without the agent and
its alternatives, burst detection delay, and each BPF program's cost per run
(bench/fpbench.c).
"""
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from rctest import Proc
from common import (FAULTBENCH, MEMHOG, OUTPUT, TARGET_OVERHEAD, dist,
    is_root, log, pct)
from harness import proc_cpu_rss, ru_cpu, start_agent


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
        # the programs' own cost: attached throughout (section "tax"
        # has the agent as it runs by default)
        return start_agent(other_pid if mode == "other" else pid,
                           "--no-evict", "--fault-probes", "on")
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
        agent = start_agent(track_other or ready["pids"][0], "--no-evict",
                            "--fault-probes", "on")
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


def overhead_modes():
    """The configurations this machine can run."""
    modes = ["none", "empty", "other", "self", "bpftrace", "poll"]
    if not is_root():
        return ["none", "poll"]
    if not shutil.which("bpftrace"):
        modes.remove("bpftrace")
    if not (os.access(FPBENCH, os.X_OK) and os.path.exists(EMPTY_BPF)):
        modes.remove("empty")
    return modes


def overhead_rounds(cfg, modes, other):
    """Every configuration once per round, in rotating order."""
    m = {k: {x: [] for x in modes}
         for k in ("runs", "cpu_runs", "detect", "watchers")}
    for r in range(cfg["overhead_rounds"]):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for mode in order:
            res = faultbench(cfg, mode, other.pid if other else None)
            m["runs"][mode].append(res["pages_per_s"])
            m["cpu_runs"][mode].append(res["pages_per_cpu_s"])
            if "watcher" in res:
                m["watchers"][mode].append(res["watcher"])
                m["detect"][mode].append(res.get("detect_ms"))
            log(f"overhead round {r + 1}: {mode}: "
                f"{res['pages_per_s']:.0f} pages/s, "
                f"{res['pages_per_cpu_s']:.0f} pages/CPU-s")
    return m


def overhead_method(cfg):
    return (
        f"faultbench maps {cfg['fault_size']}, writes one byte per 4 KiB "
        f"page (THP off for the mapping), unmaps, x{cfg['fault_rounds']}; "
        f"every configuration runs once per round, in rotating order, "
        f"{cfg['overhead_rounds']} rounds; the agent with --no-evict "
        "--fault-probes on (its programs on page faults attached "
        "throughout; section 1b has the agent as it runs by default). "
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
        "within 100 ms)")


def mode_ratios(runs, cpu_runs, mode, none_cpu_ns):
    """@mode against the no-agent run of the same round."""
    r_cpu = [x / b for x, b in zip(cpu_runs[mode], cpu_runs["none"])]
    r_wall = [x / b for x, b in zip(runs[mode], runs["none"])]
    return {
        "median_cpu": statistics.median(cpu_runs[mode]),
        "median_wall": statistics.median(runs[mode]),
        "ratio": statistics.median(r_cpu),
        "ratio_iqr": [pct(r_cpu, 25), pct(r_cpu, 75)],
        "ratio_wall": statistics.median(r_wall),
        "ratio_wall_iqr": [pct(r_wall, 25), pct(r_wall, 75)],
        "slowdown": 1 - statistics.median(r_cpu),
        "slowdown_wall": 1 - statistics.median(r_wall),
        "ns_per_fault_added": (1e9 / statistics.median(cpu_runs[mode])
                               - none_cpu_ns),
        "ratios_per_round": r_cpu}


def paired_target(pairs):
    """The target: tracked against untracked, the two faulting in turns
    under one agent (separate runs drift more than 2% apart on a shared
    machine: the runs above)."""
    t = dict(pairs["tracked"])
    t["max_slowdown"] = TARGET_OVERHEAD
    t["slowdown"] = t["ratio"] - 1
    t["slowdown_wall"] = t["ratio_wall"] - 1
    t["met"] = t["slowdown"] <= TARGET_OVERHEAD
    t["met_wall"] = t["slowdown_wall"] <= TARGET_OVERHEAD
    t["control"] = pairs["control"]
    t["paired"] = True
    return t


def separate_target(runs, cpu_runs):
    """The same from the separate runs, round by round."""
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
    return t


def bench_overhead(cfg):
    if not os.access(FAULTBENCH, os.X_OK):
        return {"skipped": f"{FAULTBENCH} is not built"}
    modes = overhead_modes()
    other = Proc([MEMHOG, "--hold", "3600"]) if is_root() else None
    tfs = TraceFs() if "bpftrace" in modes else None
    try:
        m = overhead_rounds(cfg, modes, other)
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
    runs, cpu_runs = m["runs"], m["cpu_runs"]
    none_cpu_ns = 1e9 / statistics.median(cpu_runs["none"])
    out = {"method": overhead_method(cfg),
           "ns_per_fault": none_cpu_ns,
           "pages_per_s": runs, "pages_per_cpu_s": cpu_runs, "ratios": {},
           "detect_ms": {k: dist(v) for k, v in m["detect"].items() if v},
           "watcher_cpu_frac": {
               k: statistics.median(x["cpu_frac"] for x in v)
               for k, v in m["watchers"].items() if v}}
    if not is_root():
        out["skipped_tracked"] = "needs root for the agent and bpftrace"
    for mode in modes:
        out["ratios"][mode] = mode_ratios(runs, cpu_runs, mode, none_cpu_ns)
    if pairs:
        out["target"] = paired_target(pairs)
    if "self" in out["ratios"] and "other" in out["ratios"]:
        out["separate"] = separate_target(runs, cpu_runs)
        out.setdefault("target", out["separate"])
    out["storm_agents"] = m["watchers"].get("self", [])
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


def bpf_cost_configs(cfg):
    beside = ["--beside", EMPTY_BPF]
    configs = [("none", ["--none"]), ("empty", ["--empty", EMPTY_BPF]),
               ("control", ["--empty", EMPTY_BPF] + beside)]
    for n in cfg["tracked_counts"]:
        configs.append((f"untracked-{n}", ["--tracked", n] + beside))
        configs.append((f"tracked-{n}", ["--tracked", n, "--self"] + beside))
    return configs


def prog_cost(runs, k):
    """The @k ("fault", "rss") program's cost over @runs, or None."""
    per = [v for v in (per_run(s, k) for s in runs) if v is not None]
    cnt = [s["progs"][p]["runs"] for s in runs for p in s["progs"]
           if p.startswith(k + "_")]
    if not per:
        return None
    # paired within each run: the same faults ran both programs
    diff = [a - b for a, b in ((per_run(s, k),
                                per_run(s, k, "beside"))
                               for s in runs)
            if a is not None and b is not None]
    return {"ns_per_run": statistics.median(per),
            "runs": statistics.median(cnt),
            "above_empty": (statistics.median(diff)
                            if diff else None),
            "above_iqr": ([pct(diff, 25), pct(diff, 75)]
                          if len(diff) > 1 else None)}


def bpf_cost_row(name, runs, switch):
    row = {"tracked": runs[0]["tracked"], "self": runs[0]["self"],
           "control": name == "control",
           "switch_ns": switch[name],
           "switch_ns_added": switch[name] - switch["none"],
           "other_progs": {}}
    for k in ("fault", "rss"):
        c = prog_cost(runs, k)
        if c:
            row[k] = c
    # every other program of the agent's that ran meanwhile (none of
    # them is on a path every process takes: exec, reclaim, kswapd)
    for s in runs:
        for p, v in s["progs"].items():
            if not p.startswith(("fault_", "rss_")):
                o = row["other_progs"].setdefault(p, [0, 0])
                o[0] += v["runs"]
                o[1] += v["run_time_ns"]
    return row


def bpf_cost_method(cfg):
    return (
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
        "against the same with no program loaded at all")


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
    configs = bpf_cost_configs(cfg)
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
    rows = {name: bpf_cost_row(name, runs, switch)
            for name, runs in samples.items()
            if name not in ("none", "empty")}
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
            "method": bpf_cost_method(cfg)}
