"""ramcache-top's state and screen, pure: feed() it the agent's JSON
events, screen() gives the lines to show, status_line() the plain one.
Every line leaves through the text sanitiser (sanitize.py): a process
name, label or message in the stream cannot reach the terminal raw."""
import collections
import time

from .record import LEVELS, STATUS_GROUP, Fields
from .sanitize import text
from .svg import fmt_bytes, fmt_ms


class Executor:
    def __init__(self, pid):
        self.pid = pid
        self.comm = ""
        self.rss = None
        self.memcg_usage = None
        self.memcg_limit = None
        self.headroom = None
        self.forecast = None
        self.eta = None
        self.alive = True


class Live:
    def __init__(self, keep=200):
        self.ex = collections.OrderedDict()
        self.level = None
        self.reasons = []
        self.eta = None
        self.headroom = None
        self.headroom_max = 0
        self.mem_available = None
        self.thresholds = {}
        self.evictions = collections.deque(maxlen=keep)
        self._by_seq = {}
        self.counts = collections.Counter()  # by status group
        self.sent = 0
        self.bytes_freed = 0
        self.stalls = collections.deque(maxlen=keep)
        self.stall_count = collections.Counter()
        self.stall_ns = collections.Counter()
        self.kswapd_awake = set()
        self.ooms = collections.deque(maxlen=keep)
        self.warnings = collections.deque(maxlen=keep)
        self.drops = 0
        self.bad_numbers = 0  # fields refused by record.Fields
        self.start = None
        self.start_pid = None
        self.exit = None
        self.exit_code = None
        self.events = 0
        self.t_first = None
        self.t_last = None

    def _executor(self, pid):
        e = self.ex.get(pid)
        if e is None:
            e = self.ex[pid] = Executor(pid)
        return e

    def secs(self, e):
        ts = e.num("ts_ns")
        if ts is None:
            return None
        if self.t_first is None:
            self.t_first = ts
        self.t_last = ts
        return (ts - self.t_first) / 1e9

    def feed(self, e):
        """One agent event (a dict with "type"). A field of the wrong type
        or out of bounds (a crafted record) counts as absent, and counted."""
        self.events += 1
        e = e if isinstance(e, Fields) else Fields(e)
        t = self.secs(e)
        typ = e.get("type")
        handler = _FEED.get(typ) if isinstance(typ, str) else None
        if handler:
            handler(self, e, t, e.int("pid"))
        self.bad_numbers += len(e.refused)

    def _on_start(self, e, t, pid):
        self.start = e
        self.start_pid = pid
        if pid:
            x = self._executor(pid)
            x.comm = str(e.get("comm", ""))
        self._thresholds(e, "")

    def _on_target(self, e, t, pid):
        if pid:
            x = self._executor(pid)
            x.comm = x.comm or str(e.get("comm", ""))
            x.alive = e.get("state") == "attached"
            self._thresholds(e, "")

    def _on_rss(self, e, t, pid):
        if pid in self.ex:
            self.ex[pid].rss = e.num("rss")

    def _on_summary(self, e, t, pid):
        self.mem_available = e.num("mem_available")
        self.headroom = e.num("headroom")
        self.headroom_max = max(self.headroom_max, self.headroom or 0,
                                self.mem_available or 0)
        self.drops = max(self.drops, e.num("drops", 0))
        self._thresholds(e, "threshold_")
        self._level(e)
        if pid:
            x = self._executor(pid)
            x.rss = e.num("rss", x.rss)
            x.memcg_usage = e.num("memcg_usage")
            x.memcg_limit = e.num("memcg_limit")
            x.headroom = e.num("headroom")
            x.forecast = e.num("forecast")
            x.eta = e.num("eta_s")

    def _on_pressure(self, e, t, pid):
        self._level(e)
        if pid and pid in self.ex:
            self.ex[pid].eta = e.num("eta_s")
            self.ex[pid].headroom = e.num("headroom")

    def _on_evict(self, e, t, pid):
        self.sent += 1
        seq = e.int("seq")
        ev = {"t": t, "pid": pid, "seq": seq,
              "label": str(e.get("label", "")),
              "bytes": e.num("bytes", 0), "reason": e.get("reason"),
              "status": "dry run" if e.get("dry_run") else "sent",
              "ack_ms": None, "freed_ms": None}
        self.evictions.append(ev)
        if seq is not None:
            self._by_seq[(pid, seq)] = ev

    def _on_evict_done(self, e, t, pid):
        seq = e.int("seq")
        ack, freed = e.num("ack_latency_ns"), e.num("freed_latency_ns")
        ev = self._by_seq.pop((pid, seq), None)
        if ev is None:
            ev = {"t": t, "pid": pid, "seq": seq,
                  "label": str(e.get("label", "")),
                  "bytes": e.num("bytes", 0), "reason": None,
                  "ack_ms": None}
            self.evictions.append(ev)
        ev["status"] = str(e.get("status", ""))
        if ack is not None:
            ev["ack_ms"] = ack / 1e6
        ev["freed_ms"] = freed / 1e6 if freed else None
        self.counts[STATUS_GROUP.get(ev["status"], "not_found")] += 1
        if ev["status"] == "evicted":
            self.bytes_freed += e.num("bytes_freed", 0)

    def _on_reclaim(self, e, t, pid):
        if pid in self.ex and e.get("comm"):
            self.ex[pid].comm = str(e["comm"])
        kind = str(e.get("kind", "direct"))
        self.stall_count[kind] += 1
        ns = e.num("latency_ns", 0)
        self.stall_ns[kind] += ns
        self.stalls.append({"t": t, "kind": kind, "pid": pid,
                            "comm": str(e.get("comm", "")), "ms": ns / 1e6})

    def _on_kswapd(self, e, t, pid):
        if e.get("state") == "wake":
            self.kswapd_awake.add(e.int("nid"))
        else:
            self.kswapd_awake.discard(e.int("nid"))

    def _on_oom_kill(self, e, t, pid):
        victim = e.int("victim_pid")
        if victim in self.ex and e.get("comm"):
            self.ex[victim].comm = str(e["comm"])
        self.ooms.append({"t": t, "pid": victim,
                          "comm": str(e.get("comm", "")),
                          "rss": sum(e.num(k, 0) for k in (
                              "anon_rss", "file_rss", "shmem_rss"))})

    def _on_warning(self, e, t, pid):
        self.warnings.append((t, str(e.get("message", ""))))

    def _on_error(self, e, t, pid):
        self.warnings.append((t, "error: " + str(e.get("message", ""))))

    def _on_exit(self, e, t, pid):
        self.exit = e
        self.exit_code = e.int("code")

    def _thresholds(self, e, prefix):
        for k in ("headroom", "inactive"):
            v = e.num(prefix + k)
            if v:
                self.thresholds[k] = v

    def _level(self, e):
        if e.get("level") in LEVELS:
            self.level = e["level"]
            reasons = e.get("reasons")
            self.reasons = [str(r) for r in reasons] if isinstance(
                reasons, list) else []
            self.eta = e.num("eta_s")

    @property
    def lost(self):
        return self.counts["lost"]


_FEED = {typ: getattr(Live, "_on_" + typ) for typ in (
    "start", "target", "rss", "summary", "pressure", "evict", "evict_done",
    "reclaim", "kswapd", "oom_kill", "warning", "error", "exit")}


# ---------------------------------------------------------------- screen

def bar(value, scale, width, marks=()):
    """[#####.....] of value/scale, with | at each mark (a threshold)."""
    if not scale or value is None:
        return "[" + "?" * width + "]"
    n = max(0, min(width, round(width * value / scale)))
    cells = ["#"] * n + ["."] * (width - n)
    for m in marks:
        if m and m < scale:
            i = min(width - 1, int(width * m / scale))
            cells[i] = "|"
    return "[" + "".join(cells) + "]"


def eta_text(eta):
    return "-" if eta is None else f"{eta:.1f} s"


def fit(s, width):
    return s if len(s) <= width else s[:max(0, width - 1)] + "~"


def _screen_head(st, add, clock):
    """The title, the level and the thresholds."""
    up = (st.t_last - st.t_first) / 1e9 if st.t_first is not None else 0
    who = "the whole system"
    if st.start and st.start_pid:
        who = f"pid {st.start_pid}"
    elif st.ex:
        who = "--match"
    add(f"ramcache-top - {clock}  up {up:.0f} s  following {who}  "
        f"events {st.events}  drops {st.drops}" + (
            f"  refused fields {st.bad_numbers}" if st.bad_numbers else ""),
        "title")
    lv = (st.level or "?").upper()
    add(f"Level: {lv}" + (f" ({', '.join(st.reasons)})" if st.reasons
                          else "") + (f"  headroom gone in "
                                      f"{eta_text(st.eta)}"
                                      if st.eta is not None else "")
        + ("  kswapd awake" if st.kswapd_awake else ""),
        st.level or "bold")
    th = st.thresholds
    add(f"Thresholds: evict below {fmt_bytes(th.get('headroom'))}, "
        f"inactive below {fmt_bytes(th.get('inactive'))}   MemAvailable "
        f"{fmt_bytes(st.mem_available)}")
    add("")


def _screen_executors(st, add, width):
    """The last four executors with their headroom bars, or the system."""
    th = st.thresholds
    bw = max(6, min(30, width - 71))
    add(f"{'PID':>7} {'COMMAND':<14} {'RSS':>9} {'CGROUP':>17} "
        f"{'HEADROOM':>9} {'':{bw + 2}} {'ETA':>7}", "bold")
    for x in list(st.ex.values())[-4:]:
        cg = "-"
        if x.memcg_limit and x.memcg_limit < (1 << 60):
            cg = f"{fmt_bytes(x.memcg_usage)}/{fmt_bytes(x.memcg_limit)}"
        scale = x.memcg_limit if x.memcg_limit and x.memcg_limit < (
            1 << 60) else st.mem_available
        b = bar(x.headroom, scale, bw, (th.get("headroom"),
                                        th.get("inactive")))
        eta = eta_text(x.eta) if x.alive else "exited"
        add(f"{x.pid:>7} {fit(x.comm, 14):<14} "
            f"{fmt_bytes(x.rss):>9} {cg:>17} {fmt_bytes(x.headroom):>9} "
            f"{b} {eta:>7}", st.level if x.alive else None)
    if not st.ex:
        b = bar(st.headroom, st.headroom_max, bw, (th.get("headroom"),
                                                   th.get("inactive")))
        add(f"{'-':>7} {'(system)':<14} {'-':>9} {'-':>17} "
            f"{fmt_bytes(st.headroom):>9} {b} {eta_text(st.eta):>7}",
            st.level)
    add("")


def _screen_evictions(st, add, L, height):
    """The counts, and as many of the last commands as fit in @height
    lines after those in @L."""
    c = st.counts
    add(f"Evictions: {st.sent} sent, {c['evicted']} evicted, {c['busy']} "
        f"busy, {c['lost']} lost, {c['not_found']} not found; "
        f"{fmt_bytes(st.bytes_freed)} freed", "bold")
    rows_left = height - len(L) - 9
    n_ev = max(1, min(8, rows_left // 2))
    add(f"  {'TIME':>8} {'SEQ':>5} {'LABEL':<22} {'BYTES':>9} "
        f"{'STATUS':<9} {'ACK':>9} {'RSS DROP':>9}")
    for ev in list(st.evictions)[-n_ev:]:
        add(f"  {ev['t'] or 0:>7.2f}s {ev['seq'] if ev['seq'] else '-':>5} "
            f"{fit(ev['label'], 22):<22} {fmt_bytes(ev['bytes']):>9} "
            f"{ev['status']:<9} {fmt_ms(ev['ack_ms']):>9} "
            f"{fmt_ms(ev['freed_ms']):>9}",
            "lost" if STATUS_GROUP.get(ev["status"]) == "lost" else None)
    add("")


def _screen_tail(st, add, L, height):
    """Reclaim stalls (as many as fit in @height lines after those in @L),
    OOM kills, the last warning, the agent's exit."""
    add(f"Reclaim stalls: direct {st.stall_count['direct']} "
        f"({st.stall_ns['direct'] / 1e6:.1f} ms), memcg "
        f"{st.stall_count['memcg']} ({st.stall_ns['memcg'] / 1e6:.1f} ms)",
        "bold")
    n_st = max(1, min(5, height - len(L) - 4))
    for s in list(st.stalls)[-n_st:]:
        add(f"  {s['t'] or 0:>7.2f}s {s['kind']:<6} {s['pid'] or '-':>7} "
            f"{fit(s['comm'], 16):<16} {fmt_ms(s['ms']):>9}")
    add(f"OOM kills: {len(st.ooms)}", "bold" if not st.ooms else "critical")
    for o in list(st.ooms)[-3:]:
        add(f"  {o['t'] or 0:>7.2f}s pid {o['pid']} ({o['comm']}), RSS "
            f"{fmt_bytes(o['rss'])}", "critical")
    if st.warnings:
        add(f"warning: {st.warnings[-1][1]}", "warn")
    if st.exit:
        add(f"agent exited: {st.exit.get('reason')} (code "
            f"{st.exit_code}); q to quit", "bold")


def screen(st, width=80, height=24, clock=None):
    """Lines (text, style) for one refresh; style is None, "bold",
    "title", or a level name (for colour)."""
    clock = clock or time.strftime("%H:%M:%S")
    L = []

    def add(s, style=None):
        L.append((fit(text(s), width), style))

    _screen_head(st, add, clock)
    _screen_executors(st, add, width)
    _screen_evictions(st, add, L, height)
    _screen_tail(st, add, L, height)
    return L[:height]


def status_line(st, clock=None):
    """One plain line: what a terminal would show, for a pipe or a log."""
    clock = clock or time.strftime("%H:%M:%S")
    parts = [clock, f"level {st.level or '?'}"
             + (f" ({','.join(st.reasons)})" if st.reasons else "")]
    if st.bad_numbers:
        parts.append(f"{st.bad_numbers} fields refused")
    for x in list(st.ex.values())[-4:]:
        if not x.alive:
            continue
        parts.append(f"pid {x.pid} {x.comm} rss {fmt_bytes(x.rss)} "
                     f"headroom {fmt_bytes(x.headroom)} eta "
                     f"{eta_text(x.eta)}")
    c = st.counts
    last = ""
    acked = [e for e in st.evictions if e.get("ack_ms") is not None]
    if acked:
        last = f", last ack {fmt_ms(acked[-1]['ack_ms'])}"
    parts.append(f"evictions {st.sent} ({c['evicted']} evicted, {c['busy']} "
                 f"busy, {c['lost']} lost{last})")
    parts.append(f"stalls direct {st.stall_count['direct']} memcg "
                 f"{st.stall_count['memcg']}")
    parts.append(f"oom kills {len(st.ooms)}")
    return text(" | ".join(parts))
