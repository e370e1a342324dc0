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
  tax        the fault tax against no agent: the agent's programs on page
             faults off (every domain far) and on (a domain near its
             limit), for the followed process and any other, in rotating
             rounds; the reaction ramp with them switched and kept on;
             how long an attach takes
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
  agentdeath  the agent killed with SIGKILL 20 times under each executor
             side (C library, Python module, the document's example, the
             ComfyUI package): how soon each falls back
  scaling    agent CPU, RSS and the time from an event to what it causes
             against executors under --all (1-64), entries per executor
             (100-65536), RSS events per second and executors appearing
             and leaving per second, judged against linear growth
  pycache    the ramcache Python module against dict, functools.lru_cache:
             per-call costs, and a model server in a 1 GiB memory cgroup
             (OOM kills, hits, wall seconds)
  comfyui-versions  ComfyUI alone against the package and agent in every
             real version of ../shared/comfyui, with the goals of issues
             24 and 29 (only with RAMCACHE_COMFYUI_VERSIONS=all or a list:
             hours on 2 cores); RAMCACHE_COMFYUI_CASES=ten,batch runs
             those workloads only, and with --merge keeps the rows of the
             other workloads and of versions not listed from the earlier
             run, saying so
  comfyui-models  real model loads (modelkit's SD1.5 checkpoints and
             LoRAs) in real ComfyUI, alone against the package and agent,
             at limits holding all, two and one of the session's three
             models: full-size on 0.33.0, small on 0.33.0 and 0.3.64 (only
             with RAMCACHE_COMFYUI_MODELS=all, or =small for the small
             ones, =full for the full-size ones: about an hour and a half
             on 2 cores for all)

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
Stdlib only. The harness is rctest (shared with the test suites) and
bench/harness.py; each section is a module of bench/sections/, the report
writer bench/report.py and the verdicts bench/verdicts.py.
"""
import argparse
import datetime
import json
import os
import random
import resource
import shlex
import sys
import time

from common import FULL, OUTPUT, QUICK, log, machine
from report import draw_pictures, report
from sections.agentdeath import bench_agentdeath
from sections import comfyui_versions
from sections.comfyui_models import bench_comfyui_models
from sections.comfyui_versions import bench_comfyui_versions
from sections.eviction import (bench_comfy, bench_comfy_real, bench_docexec,
                               bench_eviction)
from sections.footprint import bench_footprint
from sections.outcomes import bench_outcomes
from sections.overhead import bench_overhead
from sections.pycache import bench_pycache
from sections.reaction import bench_reaction, bench_reaction_vm
from sections.scaling import bench_scaling
from sections.tax import bench_tax
from verdicts import verdicts


# what --only names (outcomes and eviction each measure several sections)
ONLY = ("overhead", "tax", "footprint", "reaction", "reaction-vm", "scaling",
        "outcomes", "eviction", "agentdeath", "comfyui-versions", "pycache",
        "comfyui-models")
SECTIONS = ("overhead", "tax", "footprint", "reaction", "reaction_vm",
            "outcomes_noswap", "outcomes", "eviction", "agentdeath",
            "scaling", "comfyui_versions", "comfyui_models", "pycache")


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
    if "comfyui_versions" in ran:  # some cases only: the rest as they were
        res["comfyui_versions"] = comfyui_versions.merge_earlier(
            res["comfyui_versions"], old.get("comfyui_versions"), old.get("date"))
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


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="directory for results.json and "
                    "BENCHMARKS.md (default build/bench, or "
                    "build/bench/quick with --quick)")
    ap.add_argument("--md", help="write BENCHMARKS.md here instead")
    ap.add_argument("--json", help="write results.json here instead")
    ap.add_argument("--only", default="",
                    help="comma-separated sections to run: "
                    + ", ".join(ONLY))
    ap.add_argument("--merge", metavar="RESULTS",
                    help="with --only: take the sections not run from "
                    "this results.json (a full run's), so one section can "
                    "be measured again without the rest")
    ap.add_argument("--trials", type=int, help="reaction trials and "
                    "outcome rounds (fewer: e.g. to redraw the pictures)")
    args = ap.parse_args()
    # either spelling, as the section's module or as its option
    args.only = ",".join(x.strip().replace("_", "-")
                         for x in args.only.split(",") if x.strip())
    unknown = sorted(set(filter(None, args.only.split(","))) - set(ONLY))
    if unknown:
        ap.error(f"--only: no section {', '.join(unknown)} (sections: "
                 f"{', '.join(ONLY)})")
    return args


def config(args):
    cfg = dict(QUICK if args.quick else FULL)
    if args.trials:
        cfg.update(reaction_trials=args.trials, outcome_rounds=args.trials,
                   noswap_rounds=args.trials,
                   comfy=dict(cfg["comfy"], rounds=args.trials))
        if "comfy_real" in cfg:
            cfg["comfy_real"] = dict(cfg["comfy_real"], rounds=args.trials)
    return cfg


def run_sections(cfg, args, res):
    """Every section selected, in the order that keeps zram last."""
    only = set(filter(None, args.only.split(",")))

    def want(s):
        return not only or s in only

    skipped = {"skipped": "not selected (--only)"}
    res["overhead"] = bench_overhead(cfg) if want("overhead") else skipped
    res["tax"] = bench_tax(cfg) if want("tax") else skipped
    res["footprint"] = (bench_footprint(cfg, res["overhead"])
                        if want("footprint") else skipped)
    res["reaction"] = bench_reaction(cfg) if want("reaction") else skipped
    res["reaction_vm"] = (bench_reaction_vm(cfg) if want("reaction-vm")
                          else skipped)
    res["scaling"] = bench_scaling(cfg) if want("scaling") else skipped
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
    res["agentdeath"] = (bench_agentdeath(cfg) if want("agentdeath")
                         else skipped)
    res["comfyui_versions"] = (bench_comfyui_versions(cfg)
                               if want("comfyui-versions") else skipped)
    res["pycache"] = bench_pycache(cfg) if want("pycache") else skipped
    res["comfyui_models"] = (bench_comfyui_models(cfg)
                             if want("comfyui-models") else skipped)
    res["eviction"] = bench_eviction(cfg, res["outcomes"],
                                     res["outcomes_noswap"], comfy, real,
                                     doc)
    if args.merge and only:
        merge_from(res, args.merge, only)


def main():
    args = parse_args()
    cfg = config(args)
    out = args.out or os.path.join(OUTPUT, "bench",
                                   "quick" if args.quick else "")
    os.makedirs(out, exist_ok=True)
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
    run_sections(cfg, args, res)
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
