"""Section "tax": what the agent's programs cost every page fault of the
machine, against no agent at all, with the per-fault programs off (every
followed domain far from its limit) and on (a domain near it), for the
process the agent follows and for any other; and, in the same run, the
reaction ramp with the programs switched automatically and kept on, and
how long an attach takes (README "What the agent costs").
"""
import contextlib
import os
import statistics
import time

from rctest import Memcg, Proc
from common import FAULTBENCH, MiB, is_root, log, pct
from harness import start_agent
from sections.reaction import reaction_trial

# The far domain: a memcg whose limit leaves the machine's MemAvailable
# the headroom; the near one: small enough that the 64 MiB faultbench
# keeps it within the agent's margin (the programs on), never reclaiming.
FAR_LIMIT = 64 << 30
NEAR_LIMIT = 192 * MiB
CALM_GOAL = 0.005   # faults of any process at most 0.5% slower while calm
NEAR_GOAL = 0.02    # the followed process's at most 2% under pressure
RAMP_GOAL_MS = -1000  # first command >= 1 s before the first stall, p50

# configuration: (where faultbench runs, whom the agent follows, the
# state its programs on page faults must be in during the turn)
CONFIGS = {
    "none_far": ("far", None, None),
    "none_far_again": ("far", None, None),
    "calm_other": ("far", "sleeper_far", "off"),
    "calm_self": ("far", "self", "off"),
    "none_near": ("near", None, None),
    "near_self": ("near", "self", "on"),
    "near_other": ("near", "sleeper_near", "on"),
}
BASELINE = {"none_far_again": "none_far", "calm_other": "none_far",
            "calm_self": "none_far", "near_self": "none_near",
            "near_other": "none_near"}


def probes_state(agent, timeout=15):
    """The state of the agent's programs on page faults once it decided
    (its first fault_probes event), or None."""
    ev = agent.wait_type("fault_probes", timeout)
    return ev


def switched_during(agent, since_ns):
    return [e for e in agent.events if e.get("type") == "fault_probes"
            and e["ts_ns"] > since_ns]


def turn(cfg, name, cgs, sleepers):
    """One faultbench pass in configuration @name: CPU ns per page, the
    agent's probes as it ran, and the attach time it told."""
    where, follow, want = CONFIGS[name]
    fb = Proc([FAULTBENCH, "--size", cfg["fault_size"], "--rounds",
               cfg["tax_fault_rounds"], "--wait"], stdin=True,
              preexec=cgs[where].preexec())
    agent = None
    try:
        if not fb.wait_type("ready", 10):
            raise RuntimeError("faultbench did not start")
        if follow:
            pid = fb.pid if follow == "self" else sleepers[follow].pid
            agent = start_agent(pid, "--no-evict", "--interval", "10s")
            first = probes_state(agent)
            if not first or first["state"] != want:
                raise RuntimeError(f"{name}: programs {first} not {want}")
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        fb.send()
        res = fb.wait_type("result", 300)
        if not res:
            raise RuntimeError("faultbench gave no result: "
                               + " ".join(fb.err[-3:]))
        out = {"cpu_ns_per_page": 1e9 / res["pages_per_cpu_s"],
               "pages": res["pages"]}
        if agent:
            out["switched"] = len(switched_during(agent, t0))
            out["probes"] = first["state"]
            if first["state"] == "on":
                out["attach_ns"] = first["took_ns"]
        return out
    finally:
        with contextlib.suppress(OSError):
            fb.p.stdin.close()
        fb.kill()
        if agent:
            agent.stop()


def sleeper(cg):
    p = Proc(["sleep", "3600"], preexec=cg.preexec())
    return p


def tax_rounds(cfg):
    """Every configuration once a round, in rotating order."""
    names = list(CONFIGS)
    runs = {n: [] for n in names}
    tag = f"ramcache-test-{os.getpid()}-tax"
    with Memcg(FAR_LIMIT, name=f"{tag}-far") as far, \
            Memcg(NEAR_LIMIT, name=f"{tag}-near") as near:
        cgs = {"far": far, "near": near}
        sleepers = {"sleeper_far": sleeper(far),
                    "sleeper_near": sleeper(near)}
        try:
            for r in range(cfg["tax_rounds"]):
                k = r % len(names)
                for name in names[k:] + names[:k]:
                    runs[name].append(turn(cfg, name, cgs, sleepers))
                log(f"tax round {r + 1}: " + ", ".join(
                    f"{n} {runs[n][-1]['cpu_ns_per_page']:.0f}"
                    for n in names))
        finally:
            for s in sleepers.values():
                s.kill()
    return runs


def ratio_row(runs, name):
    """Median over rounds of each round's ratio to its baseline's turn."""
    base = runs[BASELINE[name]]
    rs = [a["cpu_ns_per_page"] / b["cpu_ns_per_page"]
          for a, b in zip(runs[name], base)]
    q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
    med = statistics.median(rs)
    base_ns = statistics.median(b["cpu_ns_per_page"] for b in base)
    row = {"ratio": med, "iqr": [q[0], q[2]], "rounds": len(rs),
           "ns_added": (med - 1) * base_ns, "base_ns": base_ns,
           "probes": sorted({a.get("probes") for a in runs[name]} - {None}),
           "switched": sum(a.get("switched", 0) for a in runs[name])}
    return row


def ramp_trials(cfg):
    """Reaction ramps in alternating trials: the agent as it runs by
    default (--fault-probes auto) and with the programs kept on."""
    out = {"auto": [], "on": []}
    for t in range(cfg["tax_ramp_trials"]):
        for mode in (("auto", "on") if t % 2 == 0 else ("on", "auto")):
            extra = ["--fault-probes", mode]
            tr, agent, demo = reaction_trial(cfg, extra)
            probes = [e for e in agent.of_type("fault_probes")]
            tr = {k: v for k, v in tr.items() if k != "trace"}
            tr["probes"] = [{k: e[k] for k in ("ts_ns", "state", "why",
                                                "far", "took_ns")}
                            for e in probes]
            out[mode].append(tr)
            log(f"tax ramp {mode}: evict "
                f"{ms(tr['t_evict'], tr['t_reclaim'])} ms, probes on "
                f"{ms(on_ns(tr), tr['t_reclaim'])} ms from the first stall")
    return out


def ms(t, t0):
    return None if t is None or t0 is None else round((t - t0) / 1e6)


def on_ns(tr):
    """When the programs went on in a ramp (the start when never off)."""
    ons = [p["ts_ns"] for p in tr["probes"] if p["state"] == "on"]
    offs = [p for p in tr["probes"] if p["state"] == "off"]
    if ons:
        return min(ons)
    return None if offs else tr["t_start"]


def ramp_row(trials):
    valid = [tr for tr in trials if tr["t_reclaim"] is not None]
    ev = [tr["t_evict"] - tr["t_reclaim"] for tr in valid
          if tr["t_evict"] is not None]
    on = [on_ns(tr) - tr["t_reclaim"] for tr in valid
          if on_ns(tr) is not None]
    missed = len(valid) - len(ev)
    # a miss counts as infinitely late
    ranked = ev + [float("inf")] * missed
    return {"trials": len(trials), "with_reclaim": len(valid),
            "evict_p50_ms": ms_or_none(pct(ranked, 50)),
            "evict_p99_ms": ms_or_none(pct(ranked, 99)),
            "missed": missed,
            "probes_on_p50_ms": ms_or_none(pct(on, 50)),
            "probes_off_at_start": sum(
                any(p["state"] == "off" for p in tr["probes"][:1])
                for tr in valid)}


def ms_or_none(ns):
    if ns is None or ns == float("inf"):
        return None
    return ns / 1e6


def bench_tax(cfg):
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    runs = tax_rounds(cfg)
    rows = {n: ratio_row(runs, n) for n in BASELINE}
    ramps = ramp_trials(cfg)
    attach = [r["attach_ns"] for n in runs for r in runs[n]
              if r.get("attach_ns")]
    attach += [p["took_ns"] for m in ramps.values() for tr in m
               for p in tr["probes"] if p["state"] == "on"]
    res = {"method": tax_method(cfg), "runs": runs, "rows": rows,
           "ramp": {m: ramp_row(t) for m, t in ramps.items()},
           "ramp_trials": ramps,
           "attach_ns": {"n": len(attach), "p50": pct(attach, 50),
                         "p99": pct(attach, 99),
                         "max": max(attach) if attach else None},
           "goals": {"calm": CALM_GOAL, "near": NEAR_GOAL,
                     "ramp_ms": RAMP_GOAL_MS}}
    return res


def tax_method(cfg):
    return (
        f"faultbench maps {cfg['fault_size']}, writes one byte per 4 KiB "
        f"page (THP off), unmaps, x{cfg['tax_fault_rounds']}, in a scratch "
        f"memcg: 'far' ({FAR_LIMIT >> 30} GiB limit: the machine's "
        "MemAvailable is the headroom, every domain far from its reserve) "
        f"or 'near' ({NEAR_LIMIT // MiB} MiB limit: with faultbench's 64 MiB "
        "the domain is within the agent's margin, so its programs on page "
        "faults are on, and nothing is ever reclaimed). One turn per "
        "configuration a round, in rotating order, "
        f"{cfg['tax_rounds']} rounds; each turn starts a fresh agent "
        "(defaults, --no-evict) and checks, before faultbench starts, that "
        "the agent's programs on page faults are in the state the "
        "configuration claims (its first fault_probes event), and counts "
        "any switch during the turn. Figure: faultbench's own CPU time per "
        "page (getrusage: the fault handler and any BPF program on its "
        "tracepoints run there); ratio = median over rounds of each round's "
        "ratio to that round's no-agent turn in the same memcg, with the "
        "spread (IQR); 'no agent again' is the method's own noise. Ramp: "
        "the reaction section's trial (the demo as the classic cache, "
        "the agent --dry-run) in alternating trials with --fault-probes "
        "auto (the default) and on; milliseconds from the first reclaim "
        "stall (negative: before it).")


ROW_NAMES = {
    "none_far_again": "no agent again (the method's noise)",
    "calm_other": "calm: agent following another process (faults untracked)",
    "calm_self": "calm: agent following the faulting process",
    "near_self": "near its limit: agent following the faulting process",
    "near_other": "near its limit: agent following another process of the "
                  "domain (faults untracked)",
}


def goal_of(name):
    if name.startswith("calm"):
        return CALM_GOAL
    return NEAR_GOAL if name == "near_self" else None


def noise_of(t):
    """No agent against no agent, as a fraction: the method's own noise."""
    return t["rows"]["none_far_again"]["ratio"] - 1


def passes(t, name):
    """Row @name within its goal, and told apart from the noise: with no
    agent against no agent further from 1 than the goal, this run cannot
    tell a tax of the goal's size from the machine's noise."""
    g = goal_of(name)
    return t["rows"][name]["ratio"] - 1 <= g and abs(noise_of(t)) <= g


def rows_in_order(t):
    return [(k, t["rows"][k]) for k in ROW_NAMES if k in t["rows"]]


def report(t):
    L = ["## 1b. What a fault costs, calm and near a limit, against no agent",
         ""]
    if "skipped" in t:
        return L + [f"Skipped: {t['skipped']}.", ""]
    L += [t["method"], "",
          "| configuration | programs on page faults | CPU per fault vs no "
          "agent (median of rounds) | IQR of round ratios | ns added per "
          "fault | switches during turns | goal |",
          "|---|---|---|---|---|---|---|"]
    for name, r in rows_in_order(t):
        g = goal_of(name)
        goal = "-" if g is None else (
            f"<= +{g * 100:.1f}%: "
            f"**{'PASS' if passes(t, name) else 'MISSED'}**")
        L.append(f"| {ROW_NAMES[name]} | {', '.join(r['probes']) or '-'} | "
                 f"{(r['ratio'] - 1) * 100:+.2f}% | "
                 f"{r['iqr'][0]:.3f}-{r['iqr'][1]:.3f} | "
                 f"{r['ns_added']:+.0f} | {r['switched']} | {goal} |")
    base = t["rows"]["calm_self"]["base_ns"]
    L += ["", f"A fault costs {base:.0f} ns of CPU here without any agent "
          "(median of the far no-agent turns).", ""]
    L += ["Reaction ramp in the same run (the reaction section's trial, "
          "alternating):", "",
          "| agent | trials (with a reclaim stall) | first command p50 ms | "
          "p99 ms | missed | programs on p50 ms | programs off at the "
          "first read | goal |", "|---|---|---|---|---|---|---|---|"]
    for mode, r in t["ramp"].items():
        p50 = r["evict_p50_ms"]
        ok = p50 is not None and p50 <= RAMP_GOAL_MS
        goal = (f"p50 <= {RAMP_GOAL_MS} ms: **{'PASS' if ok else 'MISSED'}**"
                if mode == "auto" else "(the same agent, programs kept on)")
        L.append(f"| --fault-probes {mode} | {r['trials']} "
                 f"({r['with_reclaim']}) | {fmt(p50)} | "
                 f"{fmt(r['evict_p99_ms'])} | {r['missed']} | "
                 f"{fmt(r['probes_on_p50_ms'])} | "
                 f"{r['probes_off_at_start']} | {goal} |")
    a = t["attach_ns"]
    if a["n"]:
        L += ["", f"An attach of the two programs (page_fault_user, "
              f"rss_stat) took p50 {a['p50'] / 1e3:.0f} us, p99 "
              f"{a['p99'] / 1e3:.0f} us, at most {a['max'] / 1e3:.0f} us "
              f"({a['n']} attaches: the near turns' start and the ramps'); "
              "the margin the agent keeps is 4 GiB/s x (50 ms + the last "
              "attach), so a slow attach brings the next one earlier."]
    return L + [""]


def fmt(v):
    return "-" if v is None else f"{v:.0f}"


def verdicts(t):
    if "rows" not in t:
        return []
    v = []
    noise = noise_of(t)
    for name, r in rows_in_order(t):
        g = goal_of(name)
        if g is None:
            continue
        why = "" if abs(noise) <= g else (
            "; not resolved: the method's own noise is larger than the goal")
        v.append(f"{'PASS' if passes(t, name) else 'MISSED'} (fault tax, "
                 f"{ROW_NAMES[name]}): {(r['ratio'] - 1) * 100:+.2f}% CPU "
                 f"per fault against no agent (goal <= +{g * 100:.1f}%; "
                 f"IQR {r['iqr'][0]:.3f}-{r['iqr'][1]:.3f}; no agent "
                 f"against no agent {noise * 100:+.2f}%{why}).")
    r = t["ramp"]["auto"]
    ok = r["evict_p50_ms"] is not None and r["evict_p50_ms"] <= RAMP_GOAL_MS
    v.append(f"{'PASS' if ok else 'MISSED'} (reaction ramp with the "
             f"programs switched): first command p50 "
             f"{fmt(r['evict_p50_ms'])} ms from the first reclaim stall "
             f"(goal <= {RAMP_GOAL_MS} ms; kept on: "
             f"{fmt(t['ramp']['on']['evict_p50_ms'])} ms).")
    return v
