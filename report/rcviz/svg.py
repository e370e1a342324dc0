"""Small SVG building blocks: scales, ticks, units, lanes and legends.

Text widths are estimated (no font metrics without a browser): CHAR_W
pixels per character at FONT px, generous, so labels placed apart by these
estimates do not touch.
"""
import math
from xml.sax.saxutils import escape, quoteattr

FONT = 12
CHAR_W = 7.2
MiB = 1 << 20
GiB = 1 << 30


def text_width(s, font=FONT):
    return len(s) * CHAR_W * font / FONT


def fmt_bytes(b):
    if b is None:
        return "-"
    a = abs(b)
    if a >= 10 * GiB:
        return f"{b / GiB:.0f} GiB"
    if a >= GiB:
        return f"{b / GiB:.1f} GiB"
    if a >= 10 * MiB:
        return f"{b / MiB:.0f} MiB"
    if a >= MiB:
        return f"{b / MiB:.1f} MiB"
    if a >= 1024:
        return f"{b / 1024:.0f} KiB"
    return f"{b:.0f} B"


def fmt_ms(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{v:.1f} ms"
    return f"{v:.3f} ms"


def fmt_s(v):
    if v is None:
        return "-"
    return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"


def nice_step(span, target):
    """A 1/2/5 x 10^k step giving about `target` intervals over span."""
    if span <= 0:
        return 1.0
    raw = span / max(1, target)
    k = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * 10 ** k >= raw:
            return m * 10 ** k
    return 10 ** (k + 1)


def ticks(lo, hi, target):
    step = nice_step(hi - lo, target)
    t = math.ceil(lo / step - 1e-9) * step
    out = []
    while t <= hi + step * 1e-9:
        out.append(round(t, 9))
        t += step
    return out, step


def byte_ticks(hi, target=4):
    """Ticks at round MiB/GiB values from 0 to hi (bytes)."""
    unit = GiB if hi >= 2 * GiB else MiB
    vals, _ = ticks(0, hi / unit, target)
    return [v * unit for v in vals]


def attr(**kw):
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        k = k.rstrip("_").replace("_", "-")
        if isinstance(v, float):
            v = f"{v:.2f}".rstrip("0").rstrip(".")
        parts.append(f"{k}={quoteattr(str(v))}")
    return " ".join(parts)


def el(tag, body=None, title=None, **kw):
    """An element; title becomes a <title> child (hover text)."""
    a = attr(**kw)
    head = f"<{tag} {a}" if a else f"<{tag}"
    inner = ""
    if title:
        inner += f"<title>{escape(title)}</title>"
    if body:
        inner += body
    if not inner:
        return head + "/>"
    return f"{head}>{inner}</{tag}>"


def text(x, y, s, anchor="start", size=FONT, **kw):
    return el("text", escape(s), x=x, y=y, text_anchor=anchor,
              font_size=size, **kw)


class Scale:
    """Linear map from [d0, d1] to pixels [r0, r1]."""

    def __init__(self, d0, d1, r0, r1):
        self.d0, self.d1, self.r0, self.r1 = d0, d1, r0, r1
        if d1 == d0:
            self.d1 = d0 + 1

    def __call__(self, v):
        return self.r0 + (v - self.d0) * (self.r1 - self.r0) / (
            self.d1 - self.d0)


class LogScale:
    """log10 map, values clamped to [d0, d1]."""

    def __init__(self, d0, d1, r0, r1):
        self.l0, self.l1 = math.log10(d0), math.log10(d1)
        self.d0, self.d1, self.r0, self.r1 = d0, d1, r0, r1

    def __call__(self, v):
        v = min(max(v, self.d0), self.d1)
        return self.r0 + (math.log10(v) - self.l0) * (self.r1 - self.r0) / (
            self.l1 - self.l0)


def decimate(points, sx, max_per_px=2):
    """Points in time order thinned to first/min/max/last per pixel
    column, so an hour of events stays a light polyline."""
    if len(points) <= 2000 or any(p[1] is None for p in points):
        return points
    out, col, bucket = [], None, []

    def flush():
        if not bucket:
            return
        lo = min(bucket, key=lambda p: p[1])
        hi = max(bucket, key=lambda p: p[1])
        keep = sorted({bucket[0], lo, hi, bucket[-1]}, key=lambda p: p[0])
        out.extend(keep)

    for p in points:
        c = int(sx(p[0]) * max_per_px)
        if c != col:
            flush()
            bucket = []
            col = c
        bucket.append(p)
    flush()
    return out


def polyline(points, sx, sy, step=False, vmax=None, **kw):
    """A line through (t, v) points; v None breaks it (no data then);
    values above vmax are drawn at vmax."""
    runs, pts, prev = [], [], None
    for t, v in points:
        if v is None:
            runs.append(pts)
            pts, prev = [], None
            continue
        if vmax is not None and v > vmax:
            v = vmax
        x, y = sx(t), sy(v)
        if step and prev is not None:
            pts.append(f"{x:.1f},{prev:.1f}")
        pts.append(f"{x:.1f},{y:.1f}")
        prev = y
    runs.append(pts)
    out = []
    for pts in runs:
        if not pts:
            continue
        if len(pts) == 1:
            pts.append(pts[0])
        out.append(el("polyline", points=" ".join(pts), fill="none", **kw))
    return "".join(out)


def lanes(intervals, gap=0.0):
    """Greedy lane per (x0, x1): the first lane whose last end is before
    x0 - gap. Returns the lane index of each interval, in input order."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    ends = []
    lane_of = [0] * len(intervals)
    for i in order:
        x0, x1 = intervals[i]
        for k, end in enumerate(ends):
            if end + gap <= x0:
                ends[k] = x1
                lane_of[i] = k
                break
        else:
            ends.append(x1)
            lane_of[i] = len(ends) - 1
    return lane_of


def legend(x, y, width, items):
    """Swatches with names, flowing left to right, wrapping at width.
    items: (name, kind, style dict). Returns (svg, height)."""
    parts = ['<g class="legend">']
    cx, cy = x, y
    row_h = 18
    for name, kind, style in items:
        w = 26 + text_width(name) + 16
        if cx + w > x + width and cx > x:
            cx = x
            cy += row_h
        parts.append(f'<g class="legend-item" data-name={quoteattr(name)}>')
        mid = cy + row_h / 2
        if kind == "line":
            parts.append(el("line", x1=cx, y1=mid, x2=cx + 20, y2=mid,
                            **style))
        elif kind == "dot":
            parts.append(el("circle", cx=cx + 10, cy=mid, r=4, **style))
        elif kind == "tick":
            parts.append(el("line", x1=cx + 10, y1=mid - 5, x2=cx + 10,
                            y2=mid + 5, **style))
        elif kind == "tri":
            parts.append(el("path", d=tri_path(cx + 10, mid, 5), **style))
        else:
            parts.append(el("rect", x=cx, y=mid - 6, width=20, height=12,
                            **style))
        parts.append(text(cx + 26, mid + 4, name))
        parts.append("</g>")
        cx += w
    parts.append("</g>")
    return "".join(parts), cy + row_h - y


def tri_path(x, y, r):
    return (f"M{x:.1f},{y - r:.1f} L{x + r:.1f},{y + r * 0.8:.1f} "
            f"L{x - r:.1f},{y + r * 0.8:.1f} Z")
