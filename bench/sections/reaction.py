"""Sections "reaction" and "reaction-vm": on one memory ramp in a scratch memcg,
first reclaim -> the agent's eviction command; PSI trigger; node-boundary
checks; the same inside Debian 12's 6.1 kernel (tests/vm/run.sh).
"""
import json
import os
import subprocess
import sys

import rctest
from rctest import Memcg
from common import MiB, OUTPUT, PSI_TRIGGER, ROOT, is_root, log, mono_ns, pct
from harness import PsiWatch, Sampler, gated_demo, scratch_dir, start_agent


# ------------------------------------------------------------ 2. reaction

def reaction_trial(cfg, extra=()):
    """One ramp: the demo as the classic cache under the agent (--dry-run,
    and @extra flags) in a scratch memcg; (its times and counts, the
    agent, the demo)."""
    with Memcg(cfg["limit"], swap_limit=0) as cg, scratch_dir() as d:
        psi = PsiWatch(cg)
        # the classic cache (no eviction at all, not even the demo's
        # allocation guard), its cache published for the agent to see
        demo = gated_demo(cg, d, "none", cfg, ["--publish"])
        agent = sampler = None
        try:
            agent = start_agent(demo.pid, "--dry-run",
                                *cfg["agent_flags"], *extra)
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
    tr = {"t_start": t_start, "t_end": t_end, "t_reclaim": t0,
          "t_oom": t_oom,
          "reclaims": len(rec), "t_evict": t_evict, "t_psi": t_psi,
          "psi_error": psi.error, "psi_path": psi.path,
          "oom_kills": oom, "demo_rc": demo.rc,
          "trace": sampler.trace if sampler else []}
    return tr, agent, demo


def reaction_method(cfg, trials, headroom):
    return (
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
        "after the process ended (OOM-killed) is a miss.")


def reaction_rows(valid, headroom):
    """Each mechanism's delay from the first reclaim stall, and misses."""
    rows = {}
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
    return rows


def bench_reaction(cfg):
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    headroom = cfg["model_size"] + 2 * cfg["output_size"]
    trials = []
    ramp = None
    for t in range(cfg["reaction_trials"]):
        tr, agent, demo = reaction_trial(cfg)
        t0, t_evict, t_psi = tr["t_reclaim"], tr["t_evict"], tr["t_psi"]
        if ramp is None and t0 is not None:
            ramp = ramp_record({
                "t_start": tr["t_start"], "t_end": tr["t_end"],
                "t_reclaim": t0, "t_evict": t_evict, "t_psi": t_psi,
                "t_oom": tr["t_oom"]}, agent, demo.pid, cfg["limit"])
        trials.append(tr)
        log(f"reaction trial {t + 1}: reclaims {tr['reclaims']}, "
            f"evict {rel_ms(t_evict, t0)} ms, psi {rel_ms(t_psi, t0)} ms, "
            f"rc {demo.rc}, oom {tr['oom_kills']}")
    res = {"method": reaction_method(cfg, trials, headroom),
           "headroom": headroom, "trials": [], "rows": {}, "ramp": ramp}
    for tr in trials:
        res["trials"].append({k: v for k, v in tr.items() if k != "trace"})
    valid = [tr for tr in trials if tr["t_reclaim"] is not None]
    res["trials_with_reclaim"] = len(valid)
    res["rows"] = reaction_rows(valid, headroom)
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
    # bench/ on PYTHONPATH in the argv: the VM passes in no environment
    # but OUTPUT, PYTHON and RAMCACHE_* (tests/vm/run.sh)
    inner = ("import json, sys; sys.argv = ['run.py']; import common; "
             "from sections.reaction import bench_reaction; "
             "cfg = dict(common.FULL, reaction_trials="
             f"{cfg['vm_reaction_trials']}); "
             "r = bench_reaction(cfg); r['machine'] = common.machine(); "
             f"print({VM_RESULT!r}, json.dumps(r), flush=True)")
    p = subprocess.run([VM_RUN, "env", "PYTHONPATH=" + os.path.join(ROOT, "bench"),
                        sys.executable, "-c", inner], cwd=ROOT,
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
