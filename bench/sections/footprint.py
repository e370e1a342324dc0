"""Section "footprint": the agent's RSS and CPU at idle and under the fault
storm, and the series its metrics page serves.
"""
import contextlib
import os
import re
import statistics
import time

from rctest import ParentMemcg, Proc
from common import MEMHOG, MiB, OUTPUT, ROOT, is_root, mono_ns
from harness import agent_following, free_port, proc_cpu_rss, start_agent


# ------------------------------------------------------------ 5. footprint

TARGET_RSS = 8 * MiB
TARGET_IDLE_CPU = 0.001  # of a core
EXECUTOR = os.path.join(OUTPUT, "tests", "executor")
EXECUTOR_ARGS = ["--entries", 16, "--bytes", MiB]
# a node as docs/fleet.md sizes a fleet: 8 executors, each in a container
# whose limit leaves every domain far from needing the fault programs
NODE_EXECUTORS = 8
NODE_DOMAIN_LIMIT = 2048 * MiB
DAEMONSET = os.path.join(ROOT, "contrib", "kubernetes", "ramcache-bpf.yaml")
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
    an executor with a control page (heartbeat every 250 ms), idle."""
    if executor:
        tgt = Proc([EXECUTOR, *EXECUTOR_ARGS], stdin=True)
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
        return idle_window(cfg, agent, addr)
    finally:
        if agent:
            agent.kill()
        tgt.kill()


def idle_node(cfg, n):
    """A node of @n containers: @n executors, each in a child cgroup with
    a limit of its own (@n domains) of one scratch parent, followed by one
    agent with --all --cgroup PARENT --metrics, idle."""
    with ParentMemcg(n * NODE_DOMAIN_LIMIT, n, "fleet",
                     child_limit=NODE_DOMAIN_LIMIT) as node:
        exs, agent = [], None
        try:
            for i in range(n):
                exs.append(Proc([EXECUTOR, *EXECUTOR_ARGS], stdin=True,
                                preexec=node.preexec(i)))
            if not all(e.wait_type("ready", 10) for e in exs):
                raise RuntimeError("an executor did not start")
            addr = f"127.0.0.1:{free_port()}"
            agent = agent_following(["--all", "--cgroup", node.rel],
                                    "--metrics", addr, timeout=30)
            if not pages_attached(agent, {e.pid for e in exs}, 15):
                raise RuntimeError("agent did not attach every page")
            return dict(idle_window(cfg, agent, addr), executors=n,
                        domain_limit=NODE_DOMAIN_LIMIT)
        finally:
            if agent:
                agent.kill()
            for e in exs:
                e.kill()


def pages_attached(agent, pids, timeout):
    """True once the agent said `control attached` for each of @pids."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pids <= {e.get("pid") for e in list(agent.events)
                    if e.get("type") == "control"
                    and e.get("state") == "attached"}:
            return True
        time.sleep(0.05)
    return False


def idle_window(cfg, agent, addr):
    """The agent, serving --metrics at @addr, scraped every 5 s as
    Prometheus would: CPU of all its threads over idle_s after warm-up,
    RSS, the series of a scrape, what the kernel told it meanwhile."""
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
    # (user/core/cadence.h); a domain near its limit brings the
    # programs on page faults on
    told = {}
    for e in agent.events[n0:]:
        k = e.get("type")
        if k == "fault_probes":
            k = f"fault programs {e.get('state')}"
        elif k == "summary" and e.get("level") != "ok":
            k = f"summaries at level {e.get('level')}"
        elif k not in ("kswapd", "reclaim", "oom_kill", "pressure"):
            continue
        told[k] = told.get(k, 0) + 1
    probes = [e.get("state") for e in agent.events
              if e.get("type") == "fault_probes"]
    return {"fault_programs": probes[-1] if probes else None,
            "cpu_frac": (c1 - c0) / (t1 - t0), "rss": rss,
            "rss_parts": parts, "scrapes": scrape_ok, "series": series,
            "kernel_events": told,
            "drops": max([s.get("drops", 0) for s in
                          agent.of_type("summary")] or [0]),
            "seconds": (t1 - t0) / 1e9}


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
    named = [m.group(1) for m in map(
        re.compile(r'domain="((?:[^"\\]|\\.)*)"').search, lines) if m]
    domains = {m.group(1) for m in map(
        re.compile(r'domain="((?:[^"\\]|\\.)*)"').search, dom) if m}
    return {"total": len(lines), "fixed": len(lines) - len(ex) - len(dom),
            "executors": len(slots), "domains": len(domains),
            "per_executor": len(ex) / max(1, len(slots)),
            "per_domain": len(dom) / max(1, len(domains)),
            "bytes": len(text),
            # the domain label's share of the bytes: a node's own cgroup
            # paths are longer or shorter than this scratch cgroup's
            "with_domain": len(named),
            "domain_chars": sum(map(len, named)) / max(1, len(named))}


# ------------------------------------------------------------ the fleet

FLEET_NODES = 1000
SCRAPE_S = 15           # Prometheus' usual scrape interval
LIMIT_MARGIN = 1.5      # the memory limit over the largest RSS expected
POD_PATH_CHARS = 124    # /kubepods/burstable/pod<uuid>/<container id>
QUANTITY = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9,
            "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def quantity(text):
    """A Kubernetes quantity ("10m" of a CPU, "16Mi" bytes) as a number."""
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text.strip().strip("\"'"))
    if not m or m.group(2) not in QUANTITY:
        raise ValueError(f"not a quantity: {text!r}")
    return float(m.group(1)) * QUANTITY[m.group(2)]


def daemonset_resources(path=DAEMONSET):
    """The agent container's resources in the DaemonSet at @path:
    {"requests": {"cpu": cores, "memory": bytes}, "limits": {...}}."""
    out, part, indent = {}, None, None
    with open(path) as f:
        for line in f:
            text = line.split("#", 1)[0].rstrip()
            depth = len(text) - len(text.lstrip())
            if text.strip() == "resources:":
                indent = depth
            elif indent is None or not text.strip():
                continue
            elif depth <= indent:
                break
            elif text.strip() in ("requests:", "limits:"):
                part = out.setdefault(text.strip()[:-1], {})
            elif part is not None and ":" in text:
                k, v = text.strip().split(":", 1)
                part[k] = quantity(v)
    return out


def fleet(f):
    """Per node and for FLEET_NODES nodes, from the node measured with
    NODE_EXECUTORS executors (@f: the footprint section): rows of (what,
    how the per-node figure is had, per node, unit); None if the node was
    not measured."""
    node = f.get("node")
    se = (node or {}).get("series")
    if not se:
        return None
    extra = POD_PATH_CHARS - se["domain_chars"]
    pod = se["bytes"] + se["with_domain"] * extra
    rows = [("Prometheus series", "one scrape", se["total"], "count"),
            (f"samples/s at a {SCRAPE_S} s scrape",
             f"{se['total']} / {SCRAPE_S} s", se["total"] / SCRAPE_S, "rate"),
            ("bytes of a scrape", "one scrape", se["bytes"], "bytes"),
            (f"scrape traffic at a {SCRAPE_S} s scrape",
             f"{se['bytes']:,} B / {SCRAPE_S} s", se["bytes"] / SCRAPE_S,
             "bytes/s"),
            (f"the same with {POD_PATH_CHARS}-character pod paths as domain "
             "names (estimate)", f"({se['bytes']:,} + {se['with_domain']} "
             f"samples x {extra:+.0f} B) / {SCRAPE_S} s", pod / SCRAPE_S,
             "bytes/s"),
            ("agent CPU, idle", "the node row", node["cpu_frac"], "cores"),
            ("agent RSS, idle", "the node row", node["rss"], "rss")]
    return {"nodes": FLEET_NODES, "executors": node["executors"],
            "series": se, "rows": rows}


def daemonset_check(f):
    """The DaemonSet's requests and limit against the node measured:
    [(ok, what)], ok None where it could not be checked. Rule: each request at least what the agent uses idle
    with NODE_EXECUTORS executors; the memory limit at least LIMIT_MARGIN
    x the largest RSS expected, the fault storm's peak (measured following
    one process) plus what the other executors add at idle."""
    ds, node = f.get("daemonset"), f.get("node")
    if not ds or not node or "rss" not in node:
        return []
    req, lim = ds.get("requests", {}), ds.get("limits", {})
    n = node["executors"]
    out = []
    if "cpu" in req:
        out.append((req["cpu"] >= node["cpu_frac"],
                    f"CPU request {req['cpu'] * 1000:g}m, at least the idle "
                    f"agent's {node['cpu_frac'] * 1000:.2f}m with {n} "
                    f"executors: x{req['cpu'] / node['cpu_frac']:.1f}"))
    if "memory" in req:
        out.append((req["memory"] >= node["rss"],
                    f"memory request {req['memory'] / MiB:g} MiB, at least "
                    f"the idle agent's RSS {node['rss'] / MiB:.1f} MiB with "
                    f"{n} executors: x{req['memory'] / node['rss']:.1f}"))
    storm = f.get("storm")
    if "memory" in lim and not storm:
        out.append((None, f"memory limit {lim['memory'] / MiB:g} MiB not "
                    "checked: no fault storm measured"))
    elif "memory" in lim:
        more = max(0, node["rss"] - f["idle_executor"]["rss"])
        peak = storm["rss"] + more
        out.append((lim["memory"] >= LIMIT_MARGIN * peak,
                    f"memory limit {lim['memory'] / MiB:g} MiB, at least "
                    f"{LIMIT_MARGIN:g} x ({storm['rss'] / MiB:.1f} MiB storm "
                    f"peak + {more / MiB:.1f} MiB that {n - 1} more idle "
                    f"executors add) = {LIMIT_MARGIN * peak / MiB:.1f} MiB"))
    return out


def bench_footprint(cfg, overhead):
    if not is_root():
        return {"skipped": "needs root for the agent"}
    idle = idle_agent(cfg, executor=False)
    idle_ex = idle_agent(cfg, executor=True)
    try:
        node = idle_node(cfg, NODE_EXECUTORS)
    except (RuntimeError, OSError) as e:
        node = {"skipped": f"failed: {e}"}
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
        "(ru_maxrss), drops from its last summary; a node: "
        f"ramcache-bpf --all --cgroup PARENT --metrics following "
        f"{NODE_EXECUTORS} of the same executors, each in a child cgroup "
        f"of one scratch parent with a limit of its own "
        f"({NODE_DOMAIN_LIMIT // MiB} MiB: {NODE_EXECUTORS} domains, all "
        "far from their limits), measured as the idle rows"),
        "idle": idle, "idle_executor": idle_ex, "node": node,
        "daemonset": dict(daemonset_resources(),
                          file=os.path.relpath(DAEMONSET, ROOT)),
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
