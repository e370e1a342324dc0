#!/usr/bin/env python3
"""Run a workload in real ComfyUI, alone or with the package and the agent,
in a scratch memory cgroup, and print what happened as JSON.

    sudo comfyui/tests/real_comfyui.py run CASE --version 0.33.0 \\
        --mode alone|package|agent --cache default|classic|recommended|'ARGS' \\
        --limit 6G [--json FILE] [--trace FILE]
    sudo comfyui/tests/real_comfyui.py table [--versions ...] [--cases ...] \\
        [--limits ...] [--runs N] --out DIR

CASE is a workload of real_workloads.py: session (the 20-prompt reuse
session), ten (ten prompts of ~384 MiB each), long (a node growing RAM
for ~10 s while an earlier output is cached), batch (ImageScaleBy lanczos
of a large batch). --version takes a tree from ../shared/comfyui (unpacked
once to /var/tmp/ramcache-comfyui-VERSION); --comfyui DIR any checkout.

Modes: alone = ComfyUI with no package; package = the package, no agent;
agent = the package and `ramcache-bpf --pid <ComfyUI>` (defaults, as the
README says; --agent-arg adds flags). --cache: ComfyUI's default cache,
--cache-classic, the command line the package's README recommends for
this version (comfyui/compat.py), or literal arguments.

The result (stdout, or --json FILE): per prompt its wall time and the
nodes executed and taken from ComfyUI's cache (its websocket messages),
totals, OOM kills in the cgroup, the cgroup's peak usage, ComfyUI's exit
status after Ctrl-C, and with the agent its commands by reason and status
and their post -> ack latency (all, and those posted while a core node
ran). --trace FILE keeps the run's record for replay: the agent's JSON
events, the cgroup's usage, inactive file and ComfyUI's RSS every 20 ms,
the page's entries whenever they change, and each node's start;
--tracerec FILE the forecast's text trace (tests/helpers/tracerec.py).

`table` runs every (version, case, limit, configuration) --runs times,
configurations in alternating turns, and writes DIR/results.json and
DIR/table.md. Exit status 0 when every run finished.
"""
import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import realcomfy as rc  # noqa: E402
import real_workloads as wl  # noqa: E402

import rctest  # noqa: E402  (comfyui/tests/rctest, the shared harness)

CORE = "core"  # ack latencies of commands posted while a core node ran
TEST_NODE_CLASSES = ("RAMCacheTestGrow",)


def comfy_args(tree, cache, pkg=rc.PKG):
    if cache == "default":
        return []
    if cache == "classic":
        return ["--cache-classic"]
    if cache == "recommended":
        return rc.recommended(tree, pkg)
    return shlex.split(cache)


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = str(s).strip().upper().rstrip("IB")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


# ------------------------------------------------------------ recording

class PageWatch:
    """The page's entries whenever its generation or entry set changes
    (read only), every 50 ms: [t_ns, generation, [[id, bytes, used_gen,
    flags, label]]]."""

    def __init__(self, pid):
        from fakeagent import FakeAgent
        self.snaps = []
        self._stop = threading.Event()
        self._pid = pid
        self._cls = FakeAgent
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _reader(self):
        fd_dir = f"/proc/{self._pid}/fd"
        with contextlib.suppress(OSError):
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{fd_dir}/{fd}").startswith("/memfd:ramcache"):
                        return self._cls(f"{fd_dir}/{fd}")
        return None

    def _run(self):
        reader, last = None, None
        while not self._stop.wait(0.05):
            reader = reader or self._reader()
            if reader is None:
                continue
            with contextlib.suppress(Exception):
                gen, ents = reader.generation(), reader.entries()
                rows = sorted([e["id"], e["bytes"], e["used_generation"], e["flags"],
                               e.get("label")] for e in ents.values())
                if (gen, rows) != last:
                    self.snaps.append([time.monotonic_ns(), gen, rows])
                    last = (gen, rows)
        if reader:
            reader.close()

    def stop(self):
        self._stop.set()
        self._t.join(5)
        return self.snaps


def inactive_file(cg):
    key = "inactive_file" if cg.version == 2 else "total_inactive_file"
    with contextlib.suppress(OSError, ValueError):
        for line in cg.read("memory.stat").splitlines():
            k, v = line.split()
            if k == key:
                return int(v)
    return None


class Trace(rc.Sampler):
    """rc.Sampler with the cgroup's inactive file: [t_ns, usage, rss, inactive_file]."""

    def _run(self):
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.samples.append([time.monotonic_ns(), rc.cg_usage(self.cg),
                                     rc.rss(self.pid), inactive_file(self.cg)])
            self._stop.wait(self.period)


# ----------------------------------------------------------- the agent

def agent_summary(events, pid, nodes):
    """The agent's commands for @pid: counts by reason, by ack status,
    bytes freed, and post -> ack latency (ms) of all and of those posted
    while a core node ran (@nodes: [t_start_ns, t_end_ns, class]), those
    split by the entry's state when asked for: inactive (served inside the
    node) or active (held until no node reads it)."""
    evicts = [e for e in events if e.get("type") == "evict" and e.get("pid") == pid]
    dones = [e for e in events if e.get("type") == "evict_done" and e.get("pid") == pid]
    by_reason, statuses = {}, {}
    for e in evicts:
        k = f"{e.get('reason')}{' (active)' if e.get('active') else ''}"
        by_reason[k] = by_reason.get(k, 0) + 1
    for d in dones:
        statuses[d.get("status")] = statuses.get(d.get("status"), 0) + 1
    posted = {e.get("seq"): e.get("ts_ns") for e in evicts}
    active = {e.get("seq") for e in evicts if e.get("active")}
    acks = [d["ack_latency_ns"] / 1e6 for d in dones if "ack_latency_ns" in d]
    core = [d for d in dones if "ack_latency_ns" in d
            and in_core_node(posted.get(d.get("seq")), nodes)]
    # an entry in use when asked for (a pending node reads it) is held
    # until it is not: its ack waits for the node by design
    free = [d["ack_latency_ns"] / 1e6 for d in core if d.get("seq") not in active]
    held = [d["ack_latency_ns"] / 1e6 for d in core if d.get("seq") in active]
    core = [d["ack_latency_ns"] / 1e6 for d in core]
    return {"commands": len(evicts), "by_reason": by_reason, "statuses": statuses,
            "evicted": statuses.get("evicted", 0),
            "bytes_freed": sum(d.get("bytes_freed", 0) for d in dones
                               if d.get("status") == "evicted"),
            "ack_ms": latency(acks), CORE + "_ack_ms": latency(core),
            CORE + "_inactive_ack_ms": latency(free),
            CORE + "_active_ack_ms": latency(held),
            "first_evict_headroom": evicts[0].get("headroom") if evicts else None,
            "evict_done": [{k: d.get(k) for k in (
                "label", "status", "bytes", "bytes_freed", "recv_latency_ns",
                "ack_latency_ns", "freed_latency_ns")} for d in dones]}


def latency(ms):
    return {"n": len(ms), "p50": rc.pct(ms, 50), "p99": rc.pct(ms, 99),
            "max": max(ms) if ms else None}


def in_core_node(t, nodes):
    return t is not None and any(a <= t < b and c not in TEST_NODE_CLASSES
                                 for a, b, c in nodes)


def node_spans(events_msgs, prompts):
    """[t_start_ns, t_end_ns, class] of every node ComfyUI ran."""
    classes = {}
    for _, p in prompts:
        for nid, n in p.items():
            classes.setdefault(nid, set()).add(n["class_type"])
    starts = []
    for t, m in events_msgs:
        d = m.get("data") or {}
        if m.get("type") == "executing":
            starts.append((t, d.get("node"), d.get("prompt_id")))
        elif m.get("type") in rc.DONE:
            starts.append((t, None, d.get("prompt_id")))
    spans = []
    for (t, n, pid), nxt in zip(starts, starts[1:] + [(None, None, None)]):
        if n is not None and nxt[0] is not None:
            spans.append([t, nxt[0], n, pid])
    return spans


# ------------------------------------------------------------- one run

def build_of(root):
    """(package folder, agent binary) of a checkout of this project."""
    out = os.environ.get("OUTPUT") if os.path.realpath(root) == os.path.realpath(rc.ROOT) \
        else None
    return os.path.join(root, "comfyui"), os.path.join(out or os.path.join(root, "build"),
                                                       "ramcache-bpf")


def model_files(tree, case):
    """The generated model files a model case loads (modelkit/generate.py,
    cached under /var/tmp/ramcache-models), None for the other cases."""
    size = wl.MODEL_CASES.get(case)
    if size is None:
        return None
    from modelkit import generate
    return generate.ensure(tree, size=size, what="all")["files"]


def uncache(files):
    """Drop the model @files' pages from the page cache, so that every run
    starts as after a boot: a file an earlier run read stays cached (charged
    to that run's cgroup, then its parent), and the next run would load it
    without a disk read or a charge of its own. Returns the bytes that were
    still cached after the drop (pages some process maps)."""
    left = 0
    for f in files or ():
        with contextlib.suppress(OSError):
            fd = os.open(f["path"], os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                left += cached_bytes(fd)
            finally:
                os.close(fd)
    return left


def cached_bytes(fd):
    """Bytes of the file @fd in the page cache (mincore of a mapping of
    it); 0 when it cannot be told."""
    import ctypes
    size = os.fstat(fd).st_size
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    addr = libc.mmap(None, size, 1, 1, fd, 0) if size else None  # PROT_READ, MAP_SHARED
    if not addr or addr == ctypes.c_void_p(-1).value:
        return 0
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
        if libc.mincore(addr, size, vec) != 0:
            return 0
        return sum(b & 1 for b in vec) * page
    finally:
        libc.munmap(addr, size)


def proc_io(pid):
    """/proc/PID/io as a dict (rchar, read_bytes, ...), {} when gone."""
    out = {}
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                k, v = line.split(":")
                out[k.strip()] = int(v)
    return out


def proc_cost(pid):
    """What the process has cost so far, from /proc/PID/stat: page faults
    (minor, major) and CPU seconds (user, system); {} when gone. A page
    fault's cost differs by machine (some 12 us in a VM here): with the
    faults beside the time, a slow prompt says whether it faulted in fresh
    memory or computed."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return {"minflt": int(st[7]), "majflt": int(st[9]),
                "user_s": int(st[11]) / tick, "sys_s": int(st[12]) / tick}
    return {}


def cost_since(pid, before):
    """proc_cost(@pid) less @before, rounded; None when either is unknown."""
    now = proc_cost(pid)
    if not now or not before:
        return None
    return {k: round(now[k] - before[k], 2) for k in now}


def model_loads(ps, prompts):
    """Model loads from disk: every loader node that ran (CheckpointLoaderSimple,
    LoraLoader, ...) and the seconds it took, per class."""
    out = {"count": 0, "seconds": 0.0, "by_class": {}}
    for r in ps:
        for _, cls, secs in r.get("nodes", ()):
            if cls in wl.LOADERS:
                out["count"] += 1
                out["seconds"] = round(out["seconds"] + secs, 3)
                out["by_class"][cls] = out["by_class"].get(cls, 0) + 1
    return out


def run_case(tree, case, mode, cache, limit, agent_args=(), trace=False, log=print,
             build=None, tracerec=None):
    """One run of workload @case (real_workloads.WORKLOADS) in @tree, with
    the package and agent of checkout @build (default: this one); the
    result as a dict (see the module's doc)."""
    prompts = wl.WORKLOADS[case]()
    pkg, agent = build_of(build or rc.ROOT)
    args = comfy_args(tree, cache, pkg)
    res = {"case": case, "version": rc.tree_version(tree), "tree": tree, "mode": mode,
           "cache": cache, "args": args, "limit": limit, "agent_args": list(agent_args),
           "build": build or rc.ROOT,
           "nodes_total": sum(len(p) for _, p in prompts),
           "perfect_cache_executions": wl.perfect_cache(prompts)[1]}
    name = f"ramcache-real-{os.getpid()}-{time.monotonic_ns()}"
    files = model_files(tree, case)
    res["cached_at_start"] = uncache(files)
    with rctest.Memcg(limit, swap_limit=0, name=name) as cg, \
            rc.started(tree, args, cg, package=mode != "alone" and pkg, models=files) as ui:
        res["idle_bytes"] = rc.cg_usage(cg)
        res["stubbed"] = ui.stubbed()
        res["io_start"] = proc_io(ui.pid)
        events = rc.Events(ui.port)
        if mode == "agent":
            rctest.AGENT = agent
            ui.agent = rctest.Agent("--pid", ui.pid, *agent_args)
            res["attached"] = rc.wait_attached(ui)
        what = f"real ComfyUI {res['version']}, {case}, {mode}, {' '.join(args) or cache}, " \
            f"limit {limit >> 20} MiB"
        rec = record_start(cg, ui, mode, trace, tracerec, what)
        res["prompts"] = drive(ui, events, prompts, mode, log, rec)
        res.update(record_stop(rec, cg, ui, events, prompts, ui.agent, res))
    return res


class TraceRec:
    """The forecast's trace recorder (tests/helpers/tracerec.py, or
    $RAMCACHE_TRACEREC) beside the run, writing its text format to @out;
    note() adds a line to it (the prompts' starts)."""

    def __init__(self, ui, cg, out, what):
        script = os.environ.get("RAMCACHE_TRACEREC") or \
            os.path.join(rc.ROOT, "tests", "helpers", "tracerec.py")
        self.fifo = f"{out}.notes"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.fifo)
        os.mkfifo(self.fifo)
        self.proc = subprocess.Popen([rc.PYTHON, script, "--pid", str(ui.pid), "--cgroup",
                                      cg.path, "--out", out, "--what", what,
                                      "--notes", self.fifo])
        self.fd = None
        end = time.monotonic() + 10
        while self.fd is None and time.monotonic() < end and self.proc.poll() is None:
            try:
                self.fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO until the recorder opened its end
                time.sleep(0.05)

    def note(self, text):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, (text + "\n").encode())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.fd is not None:
            os.close(self.fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.fifo)


def record_start(cg, ui, mode, trace, tracerec, what):
    rec = {"sampler": Trace(cg, ui.pid, 0.02 if trace else 0.1), "trace": trace}
    if trace and mode != "alone":
        rec["pages"] = PageWatch(ui.pid)
    if tracerec:
        rec["tracerec"] = TraceRec(ui, cg, tracerec, what)
    return rec


def drive(ui, events, prompts, mode, log, rec):
    out = []
    for i, (name, p) in enumerate(prompts):
        if "tracerec" in rec:
            rec["tracerec"].note(f"prompt {i} {name}")
        before = proc_cost(ui.pid)
        r = rc.run_prompt(ui, events, p)
        r["name"] = name
        r["proc"] = cost_since(ui.pid, before)
        if mode != "alone" and ui.alive():
            st = rc.status(ui)
            r["status"] = {k: st.get(k) for k in ("level", "settled", "evicted", "entries",
                                                  "models")}
        out.append(r)
        log(f"  {name}: {'ok' if r['ok'] else 'FAILED ' + str(r['error'])} "
            f"{r['wall_s']:.2f}s executed {len(r['executed'])} cached {len(r['cached'])}")
        if not ui.alive():
            break
    return out


def record_stop(rec, cg, ui, events, prompts, ag, res):
    """Totals, OOM kills, the agent's summary and Ctrl-C, after the prompts."""
    samples = rec["sampler"].stop()
    if "tracerec" in rec:
        rec["tracerec"].stop()
    pages = rec["pages"].stop() if "pages" in rec else None
    ps = res["prompts"]
    io = proc_io(ui.pid)
    out = {"ok": sum(p["ok"] for p in ps), "count": len(prompts),
           "model_loads": model_loads(ps, prompts),
           "io_read": {k: io.get(k, 0) - res.get("io_start", {}).get(k, 0)
                       for k in ("rchar", "read_bytes")} if io else None,
           "wall_s": round(sum(p["wall_s"] for p in ps), 3),
           "proc": {k: round(sum((p.get("proc") or {}).get(k, 0) for p in ps), 2)
                    for k in ("minflt", "majflt", "user_s", "sys_s")},
           "executed": sum(len(p["executed"]) for p in ps),
           "cached": sum(len(p["cached"]) for p in ps),
           "hits": hits(ps, prompts),
           "oom_kills": cg.oom_kills(), "peak_bytes": max((s[1] for s in samples), default=None),
           "alive": ui.alive()}
    spans = node_spans(events.msgs, prompts)
    if ag is not None:
        time.sleep(0.5)
        ag.stop()
        out["agent"] = agent_summary(ag.events, ui.pid, [s[:2] + [class_of(s, prompts)]
                                                         for s in spans])
    out["exit"] = ui.stop() if out["alive"] else ui.proc.returncode
    out["log_tail"] = ui.text()[-1500:] if out["exit"] != 0 or out["ok"] < len(prompts) else None
    if rec["trace"]:
        out["trace"] = {"samples": samples, "pages": pages, "nodes": spans,
                        "agent_events": ag.events if ag is not None else None,
                        "agent_stderr": ag.stderr[-50:] if ag is not None else None}
    return out


def hits(ps, prompts):
    """Nodes of the prompts that finished which ComfyUI did not have to
    run: taken from its cache, or not needed because what reads them was
    (ComfyUI 0.25 and newer skip them and list only the cached ones)."""
    return sum(max(0, len(p) - len(set(r["executed"])))
               for r, (_, p) in zip(ps, prompts) if r["ok"])


def class_of(span, prompts):
    for _, p in prompts:
        if span[2] in p:
            return p[span[2]]["class_type"]
    return None


# ------------------------------------------------------------ the table

# (mode, cache) pairs compared per version; classic only where it exists
CONFIGS = [("alone", "default"), ("alone", "classic"),
           ("agent", "recommended"), ("agent", "default")]
# the model cases (small models, ~0.68 GiB each once loaded, ComfyUI idle
# ~0.37): room for all three, for two, for one and the outputs
LIMITS = {"session": ["6G", "2.5G", "1.5G"], "ten": ["1.5G"],
          "long": ["1.5G"], "batch": ["1.5G"], "models": ["3.5G", "2.2G", "1.5G"],
          "switch": ["2.2G"], "models-full": ["14G", "10G", "6G"],
          "switch-full": ["10G"]}


def configs_for(tree, builds, only=None):
    """[(mode, cache, build name, build root)]: each configuration, the
    package's once per build (NAME=ROOT checkouts of this project)."""
    out, seen = [], set()
    for mode, cache in CONFIGS:
        if cache == "classic" and not rc.has_flag(tree, "--cache-classic"):
            continue
        if only and f"{mode}:{cache}" not in only:
            continue
        for name, root in (builds if mode != "alone" else [(None, None)]):
            # a build whose recommended line is ComfyUI's default runs once
            args = tuple(comfy_args(tree, cache, build_of(root or rc.ROOT)[0]))
            if (mode, name, args) not in seen:
                seen.add((mode, name, args))
                out.append((mode, cache, name, root))
    return out


def describe(r):
    who = {"alone": "ComfyUI alone", "package": "package, no agent",
           "agent": "package + agent"}[r["mode"]]
    if r["mode"] != "alone" and r.get("build_name"):
        who += f" ({r['build_name']})"
    return f"{who}, {r['cache']} ({' '.join(r['args']) or 'no cache flag'})"


def table_rows(results):
    """Markdown rows of @results (run_case dicts), in their order."""
    rows = ["| version | case | limit | configuration | prompts ok | wall s | executed / "
            "hits (from cache) | model loads (s) | OOM kills | peak MiB | agent commands "
            "(by reason) | ack p50 / p99 ms (core nodes: inactive entries; active) | exit |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ag = r.get("agent") or {}
        core = ag.get(CORE + "_inactive_ack_ms") or ag.get(CORE + "_ack_ms") or {}
        held = ag.get(CORE + "_active_ack_ms") or {}
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(ag.get("by_reason", {}).items()))
        rows.append(
            f"| {r['version']} | {r['case']} | {r['limit'] / rc.GiB:g} GiB | "
            f"{describe(r)} | {r.get('ok', 0)}/{r.get('count')} | "
            f"{r.get('wall_s', 0):.1f} | {r.get('executed')} / {r.get('hits')} "
            f"({r.get('cached')}) | {loads_cell(r)} | "
            f"{r.get('oom_kills')} | {(r.get('peak_bytes') or 0) / rc.MiB:.0f} | "
            f"{ag.get('commands', '-') if ag else '-'}{' (' + reasons + ')' if reasons else ''} | "
            f"{fmt(core.get('p50'))} / {fmt(core.get('p99'))}; {fmt(held.get('p99'))} | "
            f"{r.get('exit')} |")
    return rows


def loads_cell(r):
    ml = r.get("model_loads") or {}
    return f"{ml['count']} ({ml['seconds']:.1f})" if ml.get("count") else "-"


def fmt(v):
    return "-" if v is None else f"{v:.0f}"


def run_table(a):
    """Every (version, case, limit) with each configuration in turn, --runs
    times; results.json and table.md in --out (rewritten after each run)."""
    os.makedirs(a.out, exist_ok=True)
    builds = [b.split("=", 1) for b in a.build] or [("this", rc.ROOT)]
    results = []
    for version in a.versions:
        tree = rc.unpack(version)
        for case in a.cases:
            for limit in (a.limits or LIMITS[case]):
                for turn in range(a.runs):
                    for mode, cache, name, root in configs_for(tree, builds, a.only):
                        print(f"== {version} {case} {limit} {mode} {cache} {name or ''} "
                              f"(turn {turn + 1})", flush=True)
                        r = safe_run(tree, case, mode, cache, parse_size(limit), a, root)
                        r.update(turn=turn, build_name=name)
                        results.append(r)
                        save(a.out, results)
    return results


def safe_run(tree, case, mode, cache, limit, a, build):
    trace = os.path.join(a.out, "traces") if a.traces else None
    stem = f"{rc.tree_version(tree)}-{case}-{limit >> 20}M-{mode}-{cache}-{time.time():.0f}"
    if trace:
        os.makedirs(trace, exist_ok=True)
    try:
        r = run_case(tree, case, mode, cache, limit, a.agent_arg, trace=bool(trace),
                     build=build, tracerec=a.tracerec and trace and
                     os.path.join(trace, stem + ".trace"))
    except Exception as e:  # one failed run must not lose the others
        return {"case": case, "version": rc.tree_version(tree), "mode": mode, "cache": cache,
                "args": comfy_args(tree, cache), "limit": limit, "error": repr(e)}
    if trace and "trace" in r:
        name = stem + ".json"
        with open(os.path.join(trace, name), "w") as f:
            json.dump(r.pop("trace"), f)
        r["trace_file"] = os.path.join(trace, name)
    return r


def save(out, results):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(table_rows([r for r in results if "error" not in r])) + "\n")
        for r in results:
            if "error" in r:
                f.write(f"\n{r['version']} {r['case']} {r['mode']} {r['cache']}: {r['error']}\n")


# ---------------------------------------------------------------- main

def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one run of a workload")
    run.add_argument("case", choices=sorted(wl.WORKLOADS))
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--version", choices=rc.VERSIONS)
    where.add_argument("--comfyui", help="a ComfyUI checkout")
    run.add_argument("--mode", choices=("alone", "package", "agent"), default="agent")
    run.add_argument("--cache", default="recommended")
    run.add_argument("--limit", default="6G")
    run.add_argument("--json", help="write the result here (default: stdout)")
    run.add_argument("--trace", help="write the run's record here")
    run.add_argument("--tracerec", metavar="FILE",
                     help="write the forecast's text trace here (tests/helpers/tracerec.py "
                          "beside the run, or $RAMCACHE_TRACEREC)")
    run.add_argument("--build", metavar="ROOT",
                     help="the package and agent of another (built) checkout")
    tab = sub.add_parser("table", help="the comparison table")
    tab.add_argument("--versions", nargs="+", default=list(rc.VERSIONS))
    tab.add_argument("--cases", nargs="+", default=["session", "ten"])
    tab.add_argument("--limits", nargs="+", help="instead of each case's own")
    tab.add_argument("--only", nargs="+", metavar="MODE:CACHE",
                     help="only these configurations, e.g. alone:default agent:recommended")
    tab.add_argument("--runs", type=int, default=1)
    tab.add_argument("--traces", action="store_true", help="keep each run's record")
    tab.add_argument("--tracerec", action="store_true",
                     help="with --traces: also the forecast's text trace of each run "
                          "(tests/helpers/tracerec.py)")
    tab.add_argument("--out", required=True)
    tab.add_argument("--build", action="append", default=[], metavar="NAME=ROOT",
                     help="the package and agent of checkout ROOT (built), named NAME "
                          "in the table; repeatable (default: this checkout)")
    sub.add_parser("versions", help="the versions that can run here (trees found)")
    com = sub.add_parser("compat", help="check every version; the table of "
                         "comfyui/COMPATIBILITY.md")
    com.add_argument("--versions", nargs="+", default=list(rc.VERSIONS))
    com.add_argument("--write", metavar="FILE", help="replace the generated table in FILE "
                     "(comfyui/COMPATIBILITY.md)")
    com.add_argument("--json", help="write the results here")
    com.add_argument("--no-agent", action="store_true",
                     help="the control run: the same without the agent (never --write)")
    for p in (run, tab):
        p.add_argument("--agent-arg", action="append", default=[],
                       help="a flag for ramcache-bpf (repeatable)")
    return ap.parse_args(argv)


def run_compat(a):
    import real_versions as rv
    results = []
    for v in a.versions:
        print(f"== {v}", flush=True)
        results.append(rv.check_version(v, agent=not a.no_agent))
        for c in results[-1]["checks"]:
            print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}", flush=True)
    head = (f"Generated by `sudo comfyui/tests/real_comfyui.py compat --write "
            f"comfyui/COMPATIBILITY.md` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
            f", ramcache-bpf {rc.git(['rev-parse', '--short', 'HEAD'], rc.ROOT) or '?'} "
            f"(the checks of `make test`'s test_real_versions.py; what each does: below).")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if a.write and not a.no_agent:
        rv.write_compat(a.write, results, head)
    print("\n".join(rv.compat_rows(results)))
    return 0 if all(c["ok"] for r in results for c in r["checks"]) else 1


def interrupted(sig, frame):
    raise KeyboardInterrupt(f"signal {sig}")


def main(argv=None):
    # stopped by SIGINT or SIGTERM, it stops ComfyUI and the agent and
    # removes its cgroup (a background job inherits SIGINT ignored)
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    a = parse(argv)
    if a.cmd == "versions":
        print(" ".join(rc.available()))
        return 0
    if os.geteuid() != 0:
        raise SystemExit("real_comfyui.py: needs root (memory cgroup, agent)")
    if a.cmd == "compat":
        return run_compat(a)
    if a.cmd == "table":
        results = run_table(a)
        print("\n".join(table_rows([r for r in results if "error" not in r])))
        return 0 if all("error" not in r for r in results) else 1
    tree = os.path.abspath(a.comfyui) if a.comfyui else rc.unpack(a.version)
    r = run_case(tree, a.case, a.mode, a.cache, parse_size(a.limit), a.agent_arg,
                 trace=bool(a.trace), log=lambda s: print(s, file=sys.stderr, flush=True),
                 build=a.build and os.path.abspath(a.build), tracerec=a.tracerec)
    if a.trace:
        with open(a.trace, "w") as f:
            json.dump(r.pop("trace"), f)
    text = json.dumps(r, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0 if r.get("ok") == r.get("count") else 1


if __name__ == "__main__":
    sys.exit(main())
