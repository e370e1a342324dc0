"""The report's chart: a record's Timeline drawn as panels on one axis."""
import math
from xml.sax.saxutils import quoteattr

from . import svg as S
from .chart import Chart, Mark

PALETTE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f"]
LEVEL_COLOR = {"ok": "#cfe8cf", "warn": "#ffe699", "high": "#ffb366",
               "critical": "#ff6b6b"}
STATUS_COLOR = {"evicted": "#2e8b3a", "busy": "#e08a00", "lost": "#d62728",
                "not_found": "#888888", "dry_run": "#4a7fd1"}
STATUS_NAME = {"evicted": "evicted", "busy": "busy / pinned",
               "lost": "lost (timeout, no answer)",
               "not_found": "not found", "dry_run": "dry run (not sent)"}
OOM_COLOR = "#b00020"
MAX_LANES = 40
MAX_STALLS = 4000
STALL_COLOR = {"direct": "#d95f02", "memcg": "#7570b3"}


def byte_panel_domain(series_list, extra=()):
    hi = 0
    for s in series_list:
        for _, v in s:
            if v is not None:
                hi = max(hi, v)
    for v in extra:
        hi = max(hi, v or 0)
    hi = max(hi * 1.08, S.MiB)
    ticks = S.byte_ticks(hi)
    return (0, max(hi, ticks[-1])), ticks


def executor_name(tl, pid):
    comm = tl.comms.get(pid) or ""
    return f"RSS {comm} ({pid})" if comm else f"RSS pid {pid}"


def clip_to(points, t_end):
    return [p for p in points if p[0] <= t_end + 1e-9]


def oom_marks(tl):
    out = []
    for o in tl.ooms:
        label = f"OOM kill: {o.comm} ({o.victim_pid}), {S.fmt_bytes(o.rss)}"
        title = (f"OOM kill at {o.t:.3f} s: pid {o.victim_pid} ({o.comm}), "
                 f"uid {o.uid}, RSS {S.fmt_bytes(o.rss)} (anon "
                 f"{S.fmt_bytes(o.anon)}, file {S.fmt_bytes(o.file)}, "
                 f"shmem {S.fmt_bytes(o.shmem)})")
        out.append(Mark(o.t, label, "oom", OOM_COLOR, title,
                        {"pid": o.victim_pid, "comm": o.comm,
                         "rss": o.rss, "t": f"{o.t:.6f}"}))
    return out


def memory_panel(c, tl):
    items, series = [], []
    for i, pid in enumerate(sorted(tl.rss)):
        color = PALETTE[i % len(PALETTE)]
        items.append((executor_name(tl, pid), "line",
                      {"stroke": color, "stroke_width": 2}))
        series.append((tl.rss[pid], color, f"rss-{pid}", False, None))
    if tl.memcg_usage:
        items.append(("cgroup usage", "line",
                      {"stroke": "#333", "stroke_width": 1.5}))
        series.append((tl.memcg_usage, "#333", "memcg-usage", False, None))
    limits = [v for _, v in tl.memcg_limit
              if v is not None and v < (1 << 60)]
    if limits:
        items.append(("cgroup limit", "line",
                      {"stroke": OOM_COLOR, "stroke_width": 1.5,
                       "stroke_dasharray": "6 3"}))
        series.append(([p for p in tl.memcg_limit
                        if p[1] is None or p[1] < (1 << 60)],
                       OOM_COLOR, "memcg-limit", True, "6 3"))
    dom, ticks = byte_panel_domain([s[0] for s in series])
    p = c.panel("Memory", 200, items, dom, S.fmt_bytes, ticks)
    for pts, color, cls, step, dash in series:
        pts = S.decimate(clip_to(pts, c.t_end), c.sx)
        if step and pts:
            pts = pts + [(c.t_end, pts[-1][1])]
        p.add(f'<g class="series {cls}">' + S.polyline(
            pts, c.sx, p.sy, step=step, stroke=color, stroke_width=2 if
            cls.startswith("rss") else 1.5, stroke_dasharray=dash) + "</g>")
    if not series:
        p.add(S.text(c.left + 8, p.y0 + 20, "no RSS or cgroup figures in "
                     "this record", fill="#888"))


def headroom_panel(c, tl):
    items = [("headroom", "line", {"stroke": "#1f77b4", "stroke_width": 2})]
    if tl.forecast:
        items.append(("forecast (--horizon ahead)", "line",
                      {"stroke": "#1f77b4", "stroke_width": 1.5,
                       "stroke_dasharray": "4 3"}))
    th = tl.thresholds
    if th.get("headroom"):
        items.append(("evict below (--headroom)", "line",
                      {"stroke": "#d62728", "stroke_dasharray": "2 3"}))
    if th.get("inactive"):
        items.append(("evict inactive below (--inactive)", "line",
                      {"stroke": "#e08a00", "stroke_dasharray": "2 3"}))
    # in a cgroup, headroom above its limit is the system's, off scale
    limit = max((v for _, v in tl.memcg_limit if v is not None
                 and v < (1 << 60)), default=None)
    vmax = None
    if limit:
        vmax = max(limit, 2 * (th.get("inactive") or 0))
        dom, ticks = byte_panel_domain([], [vmax])
    else:
        dom, ticks = byte_panel_domain(
            [tl.headroom, tl.forecast],
            [th.get("headroom"), th.get("inactive")])
    p = c.panel("Headroom", 140, items, dom, S.fmt_bytes, ticks)
    p.add('<g class="series headroom">' + S.polyline(
        S.decimate(tl.headroom, c.sx), c.sx, p.sy, vmax=vmax,
        stroke="#1f77b4", stroke_width=2) + "</g>")
    if tl.forecast:
        p.add('<g class="series forecast">' + S.polyline(
            S.decimate(tl.forecast, c.sx), c.sx, p.sy, vmax=vmax,
            stroke="#1f77b4", stroke_width=1.5, stroke_dasharray="4 3")
            + "</g>")
    if vmax:
        p.add(S.text(c.right - 4, p.y0 + 12, f"clipped at "
                     f"{S.fmt_bytes(vmax)}", anchor="end", size=10,
                     fill="#888"))
    for key, color in (("headroom", "#d62728"), ("inactive", "#e08a00")):
        v = th.get(key)
        if not v:
            continue
        # as the summaries told them (they follow the cgroup), else flat
        pts = tl.threshold_series.get(key) or [(0.0, v)]
        pts = [(0.0, pts[0][1])] + pts + [(c.t_end, pts[-1][1])]
        p.add(f'<g class="threshold threshold-{key}"><title>--{key} '
              f'{S.fmt_bytes(v)}</title>' + S.polyline(
                  pts, c.sx, p.sy, step=True, vmax=vmax, stroke=color,
                  stroke_dasharray="2 3") + "</g>")


def available_panel(c, tl):
    items = [("MemAvailable (system)", "line",
              {"stroke": "#555", "stroke_width": 1.5})]
    dom, ticks = byte_panel_domain([tl.mem_available])
    lo = min((v for _, v in tl.mem_available if v is not None), default=0)
    # a zoom that shows movement: from a round value below the minimum
    if tl.mem_available and lo > dom[1] * 0.3:
        step = ticks[1] - ticks[0] if len(ticks) > 1 else S.MiB
        base = (lo // step) * step
        ticks2 = S.byte_ticks(dom[1] - base, 3)
        ticks = [base + t for t in ticks2 if base + t <= dom[1]]
        dom = (base, dom[1])
    p = c.panel("Available", 70, items, dom, S.fmt_bytes, ticks)
    p.add('<g class="series mem-available">' + S.polyline(
        S.decimate(tl.mem_available, c.sx), c.sx, p.sy, stroke="#555",
        stroke_width=1.5) + "</g>")


def level_panel(c, tl):
    items = [(lv, "rect", {"fill": LEVEL_COLOR[lv]})
             for lv in ("ok", "warn", "high", "critical")]
    p = c.panel("Pressure level", 24, items)
    for b in tl.bands:
        x0, x1 = c.sx(b.t0), c.sx(max(b.t1, b.t0))
        title = (f"{b.level} from {b.t0:.3f} s to {b.t1:.3f} s"
                 + (f": {', '.join(b.reasons)}" if b.reasons else "")
                 + (f"; headroom gone in {b.eta:.1f} s at the current rate"
                    if b.eta is not None else ""))
        p.add(S.el("rect", x=x0, y=p.y0 + 1, width=max(1.0, x1 - x0),
                   height=p.y1 - p.y0 - 2, fill=LEVEL_COLOR[b.level],
                   class_="level", data_level=b.level,
                   data_reasons=",".join(b.reasons), title=title))
        w = x1 - x0
        label = b.level + (f" ({', '.join(b.reasons)})" if b.reasons else "")
        if S.text_width(label, 11) + 6 > w:
            label = b.level
        if S.text_width(label, 11) + 6 <= w:
            p.add(S.text(x0 + 3, p.y1 - 8, label, size=11, fill="#333",
                         pointer_events="none"))


def eviction_panel(c, tl):
    groups = [g for g in ("evicted", "busy", "lost", "not_found", "dry_run")
              if any(e.group == g for e in tl.evictions)] or ["evicted"]
    items = [(STATUS_NAME[g], "rect", {"fill": STATUS_COLOR[g]})
             for g in groups]
    items.append(("post -> ack", "line", {"stroke": "#555",
                                          "stroke_width": 5}))
    items.append(("ack -> RSS drop", "line", {"stroke": "#555",
                                              "stroke_width": 2}))
    items.append(("RSS drop seen", "tick", {"stroke": "#222",
                                            "stroke_width": 1.5}))
    evs = sorted(tl.evictions, key=lambda e: (e.t_post, e.seq or 0))
    spans = [(c.sx(e.t_post) - 3, max(c.sx(e.t_end) + 3,
                                      c.sx(e.t_post) + 6)) for e in evs]
    # a long record: at most MAX_LANES rows, bars may then touch
    lane_of = [k % MAX_LANES for k in S.lanes(spans, gap=2)]
    n = max(lane_of) + 1 if lane_of else 1
    lane_h = 9 if n > 10 else 12
    p = c.panel("Evictions", max(24, n * lane_h + 6), items)
    for e, lane in zip(evs, lane_of):
        y = p.y0 + 4 + lane * lane_h + lane_h / 2
        color = STATUS_COLOR[e.group]
        x_post = c.sx(e.t_post)
        parts = [S.el("circle", cx=x_post, cy=y, r=2.5, fill=color)]
        if e.t_ack is not None:
            parts.append(S.el("line", x1=x_post, y1=y, x2=c.sx(e.t_ack),
                              y2=y, stroke=color, stroke_width=5,
                              class_="ack"))
        t_from = e.t_ack if e.t_ack is not None else e.t_post
        if e.t_freed is not None and e.t_freed > t_from:
            parts.append(S.el("line", x1=c.sx(t_from), y1=y,
                              x2=c.sx(e.t_freed), y2=y, stroke=color,
                              stroke_width=2, class_="freed"))
        if e.t_freed is not None:
            xf = c.sx(e.t_freed)
            parts.append(S.el("line", x1=xf, y1=y - 4, x2=xf, y2=y + 4,
                              stroke="#222", stroke_width=1.5,
                              class_="freed-tick"))
        if e.group == "lost" and e.t_done is not None:
            parts.append(S.el("line", x1=x_post, y1=y, x2=c.sx(e.t_done),
                              y2=y, stroke=color, stroke_width=1,
                              stroke_dasharray="2 2", class_="waited"))
        title = (f"#{e.seq} {e.label or e.id}: "
                 + ("dry run" if e.dry_run else (e.status or "no answer"))
                 + f", {S.fmt_bytes(e.bytes)} asked"
                 + (f", {S.fmt_bytes(e.bytes_freed)} freed"
                    if e.bytes_freed is not None else "")
                 + f"; posted at {e.t_post:.3f} s ({e.reason})"
                 + (f", ack after {S.fmt_ms(e.ack_ns / 1e6)}"
                    if e.ack_ns is not None else "")
                 + (f", RSS drop after {S.fmt_ms(e.freed_ns / 1e6)}"
                    if e.freed_ns else ""))
        data = {"seq": e.seq if e.seq is not None else "",
                "pid": e.pid, "status": e.status or "",
                "group": e.group, "t-post": f"{e.t_post:.6f}"}
        attrs = " ".join(f"data-{k}={quoteattr(str(v))}"
                         for k, v in data.items())
        p.add(f'<g class="evict" {attrs}><title>{S.escape(title)}</title>'
              + "".join(parts) + "</g>")
    if not evs:
        p.add(S.text(c.left + 8, p.y0 + 16, "no eviction commands in this "
                     "record", fill="#888"))


def stall_panel(c, tl):
    items = [("direct reclaim", "tri", {"fill": STALL_COLOR["direct"]}),
             ("memcg reclaim", "dot", {"fill": STALL_COLOR["memcg"]}),
             ("kswapd awake", "rect", {"fill": "#9ecae1"})]
    lat = [s.latency_ns / 1e6 for s in tl.stalls] or [1.0]
    lo = 10 ** math.floor(math.log10(max(1e-3, min(lat))))
    hi = 10 ** math.ceil(math.log10(max(lo * 10, max(lat))))
    ticks = []
    v = lo
    while v <= hi * 1.0001:
        ticks.append(v)
        v *= 10
    p = c.panel("Reclaim stalls (latency, log)", 110, items, (lo, hi),
                S.fmt_ms, ticks, log=True)
    # kswapd: a strip along the bottom of the panel
    for nid, t0, t1 in tl.kswapd:
        t1 = c.t_end if t1 is None else t1
        x0, x1 = c.sx(t0), c.sx(t1)
        p.add(S.el("rect", x=x0, y=p.y1 - 7, width=max(1.0, x1 - x0),
                   height=6, fill="#9ecae1", class_="kswapd",
                   title=f"kswapd{nid} awake {t0:.3f}-{t1:.3f} s"))
    stalls, note = thin_stalls(tl.stalls, c.sx)
    if note:
        p.add(S.text(c.right - 4, p.y0 + 12, note, anchor="end", size=10,
                     fill="#888"))
    for s in stalls:
        x, y = c.sx(s.t_end), p.sy(max(s.latency_ns / 1e6, lo))
        title = (f"{s.kind} reclaim stall of {s.comm} (pid {s.pid}, tid "
                 f"{s.tid}): {S.fmt_ms(s.latency_ns / 1e6)}, "
                 f"{s.nr_reclaimed} pages, ended {s.t_end:.3f} s")
        if s.kind == "direct":
            shape = S.el("path", d=S.tri_path(x, y, 4),
                         fill=STALL_COLOR["direct"], fill_opacity=0.75)
        else:
            shape = S.el("circle", cx=x, cy=y, r=3,
                         fill=STALL_COLOR["memcg"], fill_opacity=0.6)
        p.add(f'<g class="stall" data-kind={quoteattr(s.kind)}>'
              f"<title>{S.escape(title)}</title>{shape}</g>")


def thin_stalls(stalls, sx):
    """All stalls, or for a long record the longest of each kind per
    pixel column (the tables still count them all)."""
    if len(stalls) <= MAX_STALLS:
        return stalls, None
    best = {}
    for s in stalls:
        k = (s.kind, int(sx(s.t_end)))
        if k not in best or s.latency_ns > best[k].latency_ns:
            best[k] = s
    kept = sorted(best.values(), key=lambda s: s.t_end)
    return kept, (f"{len(stalls)} stalls: the longest per pixel and kind "
                  f"shown ({len(kept)})")


def report_svg(tl, width=1200):
    c = Chart(tl.duration, width=width)
    c.marks(oom_marks(tl))
    memory_panel(c, tl)
    headroom_panel(c, tl)
    if tl.mem_available:
        available_panel(c, tl)
    level_panel(c, tl)
    eviction_panel(c, tl)
    stall_panel(c, tl)
    return c.finish()
