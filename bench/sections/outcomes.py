"""Section "outcomes": the demo workload under a memcg limit (zram swap when
free) for the classic cache, local, PSI-driven and ramcache-bpf policies.
"""
import contextlib
import statistics
import time

import rctest
from rctest import Memcg, Skip, ZramSwap
from common import MiB, PSI_TRIGGER, is_root, log, mono_ns
from harness import (Sampler, demo_done, gated_demo, memcg_stat, scratch_dir,
    start_agent, vmstat)
from sections.eviction import evict_rows, held_seqs


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
        "evict_done": evict_rows(ack, held_seqs(agent)),
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
