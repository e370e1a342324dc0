"""The verdicts: each target of BENCHMARKS.md met, missed or not measured.
"""
from common import MiB
from report import check_word, fmt_ms, pass_missed
from sections import agentdeath, comfyui_models, comfyui_versions, footprint, scaling, tax
from sections.overhead import TARGET_TRACKED_NS, TARGET_UNTRACKED_NS


def verdicts(res):
    v = overhead_verdicts(res["overhead"])
    v += tax.verdicts(res.get("tax", {}))
    v += reaction_verdicts(res["reaction"], res.get("reaction_vm", {}))
    for oc in (res["outcomes"], res.get("outcomes_noswap", {})):
        v += outcome_verdicts(oc)
    v += footprint_verdicts(res.get("footprint", {}))
    v += scaling.verdicts(res.get("scaling", {}))
    if not v:
        v.append("No target was measured (sections skipped).")
    v += eviction_verdicts(res)
    return v


def overhead_verdicts(o):
    """The end-to-end target, each program's cost, burst detection."""
    v = []
    if "target" not in o:
        return v
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
    return v


def reaction_verdicts(r, rv):
    """First command against the first stall; PSI; node checks."""
    v = []
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
    if "rows" in rv:
        rb = rv["rows"]["ramcache-bpf"]
        v.append(f"On Debian 12's 6.1 kernel (cgroup v2, in the VM), "
                 + (f"ramcache-bpf posted its first command at p50 "
                    f"{fmt_ms(rb['p50'])} ms from the first reclaim stall."
                    if rb["hits"] else
                    "MISSED: ramcache-bpf posted no eviction command on "
                    "the ramp."))
    return v


def outcome_verdicts(oc):
    """Who finished, who was OOM-killed, who stalled longer."""
    v = []
    if "rows" not in oc:
        return v
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
    return v


def footprint_verdicts(f):
    v = []
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
    v += [f"{check_word(ok)} (the DaemonSet, per node of "
          f"{f['node']['executors']} executors): {what}."
          for ok, what in footprint.daemonset_check(f)]
    if "skipped" in f.get("node", {}):
        v.append("Not measured: the agent on a node of "
                 f"{footprint.NODE_EXECUTORS} executors, the fleet table "
                 f"and the DaemonSet's check ({f['node']['skipped']}).")
    return v


def eviction_verdicts(res):
    """The C demo's target; the Python executors; what was not run."""
    v = []
    ev = res.get("eviction", {})
    cd = ev.get("c_demo", {})
    if cd.get("post_to_ack_ms", {}).get("n") and "target_ms" in ev:
        tgt = ev["target_ms"]["c_demo"]
        nh, held = cd.get("post_to_ack_not_held_ms"), cd.get("post_to_ack_held_ms")
        if nh and nh.get("n"):
            # a command for an entry in use waits for the safe point after
            # that use (Busy entries): the target is the others'
            v.append(f"{pass_missed(nh['p99'] <= tgt)}: C demo eviction post -> "
                     f"ack p99 {fmt_ms(nh['p99'])} ms for entries not in use "
                     f"(target <= {tgt:.0f} ms, one safe-point interval plus "
                     f"2 ms); {held['n']} commands held for entries in use, "
                     f"acked p50 {fmt_ms(held['p50'])} ms, p99 "
                     f"{fmt_ms(held['p99'])} ms after the post.")
        else:
            p99 = cd["post_to_ack_ms"]["p99"]
            v.append(f"{pass_missed(p99 <= tgt)}: C demo eviction post -> ack "
                     f"p99 {fmt_ms(p99)} ms (target <= {tgt:.0f} ms, one "
                     "safe-point interval plus 2 ms; held commands not told "
                     "apart in this run).")
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
    v += agentdeath.verdicts(res.get("agentdeath", {}))
    cv = res.get("comfyui_versions", {})
    v += comfyui_versions.verdicts(cv)
    if "skipped" in cv:
        v.append("Not measured: ComfyUI alone against the agent in the real "
                 f"versions ({cv['skipped']}).")
    cm = res.get("comfyui_models", {})
    v += comfyui_models.verdicts(cm)
    if "skipped" in cm:
        v.append(f"Not measured: real model loads ({cm['skipped']}).")
    return v
