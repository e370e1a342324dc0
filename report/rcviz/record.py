"""A record of the agent (`ramcache-bpf --json` lines) as a timeline.

Pure: load() parses lines, Timeline holds series, intervals and marks on
one axis, seconds since the record's `start` event. Every JSON event of the
agent carries ts_ns (CLOCK_MONOTONIC); a line without one (an agent older
than the record format) takes the time of the line before it.

Every number is read through Fields (below), within the bounds of what the
agent writes; a field that holds anything else counts as absent and is
counted (Timeline.bad_numbers), so that a crafted record draws like any
other instead of crashing the viewer.
"""
import json
import math

from .sanitize import deep

# evict_done status -> how the report groups it
STATUS_GROUP = {
    "evicted": "evicted",
    "busy": "busy",
    "pinned": "busy",
    "not_found": "not_found",
    "timeout": "lost",
    "unacked": "lost",
}
LEVELS = ("ok", "warn", "high", "critical")


class Eviction:
    """One command: posted, acked by the executor, memory seen freed."""

    def __init__(self, pid, seq):
        self.pid = pid
        self.seq = seq
        self.id = None
        self.label = ""
        self.bytes = 0
        self.reason = ""
        self.headroom = None
        self.forecast = None
        self.dry_run = False
        self.t_post = None
        self.t_done = None
        self.t_recv = None
        self.t_ack = None
        self.t_freed = None
        self.status = None  # None: no evict_done in the record
        self.bytes_freed = None
        self.ack_ns = None
        self.freed_ns = None

    @property
    def group(self):
        if self.dry_run:
            return "dry_run"
        if self.status is None:
            return "lost"
        return STATUS_GROUP.get(self.status, "not_found")

    @property
    def t_end(self):
        return max(t for t in (self.t_post, self.t_ack, self.t_freed,
                               self.t_done) if t is not None)


class Stall:
    def __init__(self, t_end, e):
        self.kind = str(e.get("kind", "direct"))
        self.latency_ns = e.num("latency_ns", 0)
        self.t_end = t_end
        self.t_start = t_end - self.latency_ns / 1e9
        self.pid = e.int("pid")
        self.tid = e.int("tid")
        self.comm = str(e.get("comm", ""))
        self.nr_reclaimed = e.num("nr_reclaimed", 0)


class Oom:
    def __init__(self, t, e):
        self.t = t
        self.victim_pid = e.int("victim_pid")
        self.comm = str(e.get("comm", ""))
        self.uid = e.int("uid")
        self.anon = e.num("anon_rss", 0)
        self.file = e.num("file_rss", 0)
        self.shmem = e.num("shmem_rss", 0)

    @property
    def rss(self):
        return self.anon + self.file + self.shmem


class Band:
    """The pressure level from t0 to t1, with its reasons."""

    def __init__(self, t0, level, reasons, eta):
        self.t0 = t0
        self.t1 = t0
        self.level = level
        self.reasons = list(reasons)
        self.eta = eta


class Timeline:
    def __init__(self):
        self.t0_ns = None
        self.duration = 0.0
        self.start = {}
        self.comms = {}  # pid -> comm of followed executors
        self.rss = {}  # pid -> [(t, bytes)]
        self.memcg_usage = []
        self.memcg_limit = []
        self.mem_available = []
        self.headroom = []
        self.forecast = []
        self.thresholds = {}  # the last in force
        self.threshold_series = {"headroom": [], "inactive": []}
        self.bands = []
        self.evictions = []
        self.stalls = []
        self.kswapd = []  # (nid, t_wake, t_sleep or None)
        self.ooms = []
        self.warnings = []  # (t, message)
        self.targets = []  # (t, state, pid, comm)
        self.drops = 0
        self.exit = None
        self.bad_lines = 0
        self.bad_numbers = 0  # fields refused by Fields
        self.events = 0

    def secs(self, ts_ns):
        return (ts_ns - self.t0_ns) / 1e9


def parse_lines(lines):
    """Events (Fields) of the lines, every string in them through the text
    sanitiser; counts the lines that are not (a record cut by a crash ends
    in half a line; a crafted one nests deeper than Python recurses)."""
    out, bad = [], 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
            if isinstance(ev, dict) and isinstance(ev.get("type"), str):
                out.append(Fields(deep(ev)))
                continue
        except (ValueError, RecursionError):
            pass
        bad += 1
    return out, bad


def load(path):
    # a byte that is not UTF-8 is kept for the sanitiser to show as \\xHH
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        events, bad = parse_lines(f)
    tl = build(events)
    tl.bad_lines += bad
    return tl


# The agent writes its numbers as u64 (doubles for rates and eta_s, from
# u64 too): a number outside [0, 2^64) or not finite is none of its own.
# A float below NUM_TINY (finer than a nanosecond) reads as 0, so that no
# ratio of two bounded numbers (a bar, a scale) overflows a float.
NUM_MAX = 1 << 64
NUM_TINY = 1e-9


def num_field(v):
    """@v if it is a number within the bounds above, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or not 0 <= v < NUM_MAX:
            return None
        return v if v >= NUM_TINY else 0.0
    return v if 0 <= v < NUM_MAX else None


def int_field(v):
    """An integer field (a pid, a count) within the bounds, None when the
    record holds anything else there."""
    return v if isinstance(v, int) and num_field(v) is not None else None


class Fields(dict):
    """An event whose numbers are read bounded: num() and int() give None
    for a field that is absent, null, or holds anything but a number in
    bounds; each field refused so is counted once (refused)."""

    def __init__(self, e):
        super().__init__(e)
        self.refused = set()

    def _read(self, key, check, default):
        v = self.get(key)
        if v is None:
            return default
        got = check(v)
        if got is None:
            self.refused.add(key)
            return default
        return got

    def num(self, key, default=None):
        return self._read(key, num_field, default)

    def int(self, key, default=None):
        return self._read(key, int_field, default)


def build(events, t0_ns=None):
    """A Timeline from parsed events, in record order; time 0 is t0_ns,
    else the start event, else the first stamp (else 0)."""
    tl = Timeline()
    events = [e if isinstance(e, Fields) else Fields(e) for e in events]
    stamped = [(e["type"], e.num("ts_ns")) for e in events]
    stamps = [ts for _, ts in stamped if ts is not None]
    starts = [ts for typ, ts in stamped if typ == "start" and ts is not None]
    tl.t0_ns = t0_ns if t0_ns is not None else (
        starts[0] if starts else min(stamps, default=0))
    b = _Builder(tl)
    last = tl.t0_ns
    for e, (typ, ts) in zip(events, stamped):
        ts = last if ts is None else ts
        last = max(last, ts)
        tl.events += 1
        handler = _HANDLERS.get(typ)
        if handler:
            handler(b, tl.secs(ts), e.int("pid"), e)
        tl.bad_numbers += len(e.refused)
    _finish(tl, b, last)
    return tl


def _finish(tl, b, last):
    """Close what is still open at the record's end, and sort the series."""
    tl.duration = max(0.0, tl.secs(last))
    for nid, t_wake in b.kswapd_open.items():
        tl.kswapd.append((nid, t_wake, None))
    if tl.bands:
        tl.bands[-1].t1 = tl.duration
    for series in tl.rss.values():
        series.sort(key=lambda p: p[0])
    for s in (tl.headroom, tl.forecast):
        s.sort(key=lambda p: p[0])
    tl.stalls.sort(key=lambda s: s.t_end)


class _Builder:
    """What build() keeps between events: commands posted and not yet
    done, kswapd wakes without their sleep, the level in force."""

    def __init__(self, tl):
        self.tl = tl
        self.evs = {}
        self.kswapd_open = {}
        self.level_now = None

    def _thresholds(self, e):
        for k in ("headroom", "inactive"):
            v = e.num(k)
            if v:
                self.tl.thresholds[k] = v

    def start(self, t, pid, e):
        self.tl.start = e
        if pid:
            self.tl.comms[pid] = str(e.get("comm", ""))
        self._thresholds(e)

    def target(self, t, pid, e):
        tl = self.tl
        tl.targets.append((t, e.get("state"), pid, e.get("comm")))
        if e.get("state") == "attached" and pid:
            tl.comms[pid] = str(e.get("comm", ""))
            self._thresholds(e)
        if e.get("state") == "exited" and pid in tl.rss:
            tl.rss[pid].append((t, None))

    def rss(self, t, pid, e):
        # without a pid it belongs to no executor (and would not sort)
        v = e.num("rss")
        if pid is not None and v is not None:
            self.tl.rss.setdefault(pid, []).append((t, v))

    def summary(self, t, pid, e):
        tl = self.tl
        _comm(tl, pid, e)
        rss = e.num("rss")
        if pid and rss:
            tl.rss.setdefault(pid, []).append((t, rss))
        for key, series in (("memcg_usage", tl.memcg_usage),
                            ("memcg_limit", tl.memcg_limit),
                            ("mem_available", tl.mem_available),
                            ("headroom", tl.headroom),
                            ("forecast", tl.forecast)):
            v = e.num(key)
            if v is not None:
                series.append((t, v))
            elif series and series[-1][1] is not None:
                series.append((t, None))  # a gap: no target then
        tl.drops = max(tl.drops, e.num("drops", 0))
        for k in ("headroom", "inactive"):
            v = e.num("threshold_" + k)
            if v:
                tl.thresholds[k] = v
                tl.threshold_series[k].append((t, v))
        if e.get("level") in LEVELS:
            self.level_now = _level(tl, t, e, self.level_now)

    def pressure(self, t, pid, e):
        if e.get("level") in LEVELS:
            self.level_now = _level(self.tl, t, e, self.level_now,
                                    force=True)
        v = e.num("headroom")
        if v is not None:
            self.tl.headroom.append((t, v))

    def evict(self, t, pid, e):
        tl = self.tl
        seq = e.int("seq")
        ev = Eviction(pid, seq)
        ev.dry_run = bool(e.get("dry_run")) or seq is None
        ev.id = e.get("id")
        ev.label = str(e.get("label", ""))
        ev.bytes = e.num("bytes", 0)
        ev.reason = str(e.get("reason", ""))
        ev.headroom = e.num("headroom")
        ev.forecast = e.num("forecast")
        ev.t_post = t
        tl.evictions.append(ev)
        if seq is not None:
            self.evs[(pid, seq)] = ev
        if ev.headroom is not None:
            tl.headroom.append((t, ev.headroom))
        if ev.forecast is not None:
            tl.forecast.append((t, ev.forecast))

    def evict_done(self, t, pid, e):
        seq = e.int("seq")
        ack, recv = e.num("ack_latency_ns"), e.num("recv_latency_ns")
        freed = e.num("freed_latency_ns")
        ev = self.evs.pop((pid, seq), None)
        if ev is None:  # its post is before the record began
            ev = Eviction(pid, seq)
            ev.id = e.get("id")
            ev.label = str(e.get("label", ""))
            ev.bytes = e.num("bytes", 0)
            ev.t_post = t - max(ack or 0, freed or 0) / 1e9
            self.tl.evictions.append(ev)
        ev.t_done = t
        ev.status = str(e.get("status", ""))
        ev.bytes_freed = e.num("bytes_freed")
        if recv is not None:
            ev.t_recv = ev.t_post + recv / 1e9
        if ack is not None:
            ev.ack_ns = ack
            ev.t_ack = ev.t_post + ack / 1e9
        if freed:
            ev.freed_ns = freed
            ev.t_freed = ev.t_post + freed / 1e9

    def reclaim(self, t, pid, e):
        self.tl.stalls.append(Stall(t, e))
        _comm(self.tl, pid, e)

    def kswapd(self, t, pid, e):
        nid = e.int("nid", 0)
        if e.get("state") == "wake":
            self.kswapd_open.setdefault(nid, t)
        elif e.get("state") == "sleep":
            t_wake = self.kswapd_open.pop(nid, None)
            self.tl.kswapd.append((nid, t if t_wake is None else t_wake, t))

    def oom_kill(self, t, pid, e):
        self.tl.ooms.append(Oom(t, e))
        _comm(self.tl, e.int("victim_pid"), e)

    def warning(self, t, pid, e):
        typ = e["type"]
        self.tl.warnings.append((t, ("error: " if typ == "error" else "")
                                 + str(e.get("message", ""))))

    def exit(self, t, pid, e):
        self.tl.exit = e


_HANDLERS = {
    "start": _Builder.start, "target": _Builder.target, "rss": _Builder.rss,
    "summary": _Builder.summary, "pressure": _Builder.pressure,
    "evict": _Builder.evict, "evict_done": _Builder.evict_done,
    "reclaim": _Builder.reclaim, "kswapd": _Builder.kswapd,
    "oom_kill": _Builder.oom_kill, "warning": _Builder.warning,
    "error": _Builder.warning, "exit": _Builder.exit,
}

def _comm(tl, pid, e):
    """A followed pid's comm as the kernel last named it (the one at
    attach time may be a wrapper's, before its exec)."""
    if pid in tl.comms and e.get("comm"):
        tl.comms[pid] = str(e["comm"])


def _level(tl, t, e, now, force=False):
    """Extends or opens a pressure band; returns the level in force."""
    level = e["level"]
    reasons = e.get("reasons")
    reasons = [str(r) for r in reasons] if isinstance(reasons, list) else []
    eta = e.num("eta_s")
    if tl.bands and tl.bands[-1].level == level:
        b = tl.bands[-1]
        b.t1 = t
        for r in reasons:
            if r not in b.reasons:
                b.reasons.append(r)
        if eta is not None and (b.eta is None or eta < b.eta):
            b.eta = eta
        return level
    if tl.bands:
        tl.bands[-1].t1 = t
    tl.bands.append(Band(t, level, reasons, eta))
    return level


# ---------------------------------------------------------------- summaries

def percentile(values, p):
    """Nearest-rank percentile of a list, None when empty."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(-(-p * len(v) // 100)) - 1))
    return v[k]


def latency_stats(values_ns):
    ms = [v / 1e6 for v in values_ns]
    return {"n": len(ms), "p50": percentile(ms, 50),
            "p90": percentile(ms, 90), "p99": percentile(ms, 99),
            "max": max(ms) if ms else None}


def summarize(tl):
    """The report's tables, as plain data."""
    real = [e for e in tl.evictions if not e.dry_run]
    by_status = {}
    for e in tl.evictions:
        k = "dry run" if e.dry_run else (e.status or "no answer")
        by_status[k] = by_status.get(k, 0) + 1
    recv = [(e.t_recv - e.t_post) * 1e9 for e in real
            if e.t_recv is not None]
    out = {
        "evictions": len(tl.evictions),
        "by_status": by_status,
        "post_to_recv": latency_stats(recv),
        "post_to_ack": latency_stats([e.ack_ns for e in real
                                      if e.ack_ns is not None]),
        "post_to_freed": latency_stats([e.freed_ns for e in real
                                        if e.freed_ns]),
        "bytes_freed": sum(e.bytes_freed or 0 for e in real
                           if e.status == "evicted"),
        "bytes_asked": sum(e.bytes for e in real),
        "stalls": {},
        "kswapd_wakes": len(tl.kswapd),
        "ooms": len(tl.ooms),
        "drops": tl.drops,
        "warnings": len(tl.warnings),
        "bad_lines": tl.bad_lines,
    }
    for kind in ("direct", "memcg"):
        lat = [s.latency_ns for s in tl.stalls if s.kind == kind]
        st = latency_stats(lat)
        st["total_ms"] = sum(lat) / 1e6
        out["stalls"][kind] = st
    return out
