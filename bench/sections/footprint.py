"""Section "footprint": the agent's RSS and CPU at idle and under the fault
storm, and the series its metrics page serves.
"""
import contextlib
import os
import re
import statistics
import time

from rctest import Proc
from common import MEMHOG, MiB, OUTPUT, is_root, mono_ns
from harness import free_port, proc_cpu_rss, start_agent


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
