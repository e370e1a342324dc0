"""What every part of the benchmarks shares: paths, the two configurations
(FULL for `make bench`, QUICK for `make test`), the clock, log lines,
percentiles and the machine's description.
"""
import contextlib
import os
import platform
import sys
import time

import rctest


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.environ.get("OUTPUT") or os.path.join(ROOT, "build")
if not os.path.isabs(OUTPUT):
    OUTPUT = os.path.join(ROOT, OUTPUT)

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
    "tax_rounds": 16, "tax_fault_rounds": 10, "tax_ramp_trials": 6,
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
    "death_kills": 20,
    # the executor written from docs/control-page.md alone
    "docexec": {"rounds": 3, "limit": 256 * MiB, "entries": 24, "size": 16,
                "every_ms": 100,
                "agent_flags": ["--headroom", "64M", "--inactive", "128M"]},
    "comfy": {"rounds": 3, "limit": 512 * MiB, "prompts": 12, "mib": 64,
              "steps": 8, "step_s": 0.05,
              "agent_flags": ["--headroom", "96M", "--inactive", "192M"]},
    # every real ComfyUI version (RAMCACHE_COMFYUI_VERSIONS): turns of
    # each configuration, alternating; hours on 2 cores
    "comfy_versions": {"runs": 1, "timeout": 6 * 3600},
    # real ComfyUI (RAMCACHE_COMFYUI): about 35 s a round on 2 cores
    "comfy_real": {"rounds": 3, "limit": "1.5G", "timeout": 600,
                   "agent_flags": ["--headroom", "256M",
                                   "--inactive", "512M"]},
    # the curves of issue 28 item 2: points, and each point's window
    "scaling": {"executors": [1, 4, 16, 64],
                "entries": [100, 1000, 10000, 65536],
                "rss_rates": [10, 40, 160], "churn_rates": [1, 4, 16],
                "churn_life_s": 1.0, "window_s": 8.0, "warm_s": 2.0},
}
QUICK = {
    "overhead_rounds": 1, "fault_size": "4M", "fault_rounds": 5,
    "pair_turns": 3, "pair_rounds": 2,
    "bpf_cost_rounds": 2, "tracked_counts": [1, 8],
    "switches": 2000,
    "idle_s": 1.0, "warmup_s": 0.5,
    "tax_rounds": 1, "tax_fault_rounds": 2, "tax_ramp_trials": 1,
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
    "death_kills": 2,
    "docexec": {"rounds": 1, "limit": 128 * MiB, "entries": 20, "size": 8,
                "every_ms": 20,
                "agent_flags": ["--headroom", "32M", "--inactive", "64M"]},
    "comfy": {"rounds": 1, "limit": 384 * MiB, "prompts": 10, "mib": 32,
              "steps": 2, "step_s": 0.02,
              "agent_flags": ["--headroom", "48M", "--inactive", "96M"]},
    "scaling": {"executors": [1, 4], "entries": [100, 1000],
                "rss_rates": [10, 40], "churn_rates": [1, 4],
                "churn_life_s": 0.5, "window_s": 1.0, "warm_s": 0.3},
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
