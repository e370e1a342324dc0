"""A stack of panels on one time axis (seconds), as one SVG.

    c = Chart(t_end=12.5)
    c.marks([Mark(3.1, "OOM kill ...", "oom", "#c00")])  # before panels
    y = c.panel("Memory", 200, legend_items)  # -> PanelArea
    y.line(points, color)...
    svg = c.finish()

Marks are vertical lines through every panel with their labels in lanes
above the first panel, so no two labels overlap.
"""
from xml.sax.saxutils import quoteattr

from . import svg as S

AXIS = "#444"
GRID = "#e4e4e4"


class Mark:
    def __init__(self, t, label, cls, color, title=None, data=None):
        self.t = t
        self.label = label
        self.cls = cls
        self.color = color
        self.title = title or label
        self.data = data or {}


class Panel:
    """A plot area: x from the chart, y scale of its own."""

    def __init__(self, chart, name, y0, y1, sy):
        self.chart = chart
        self.name = name
        self.y0, self.y1 = y0, y1
        self.sy = sy
        self.sx = chart.sx
        self.parts = []

    def add(self, s):
        if s:
            self.parts.append(s)


class Chart:
    def __init__(self, t_end, width=1200, left=96, right=24, title=None,
                 t_label="time since start (s)"):
        self.t_end = max(t_end, 1e-3)
        self.width = width
        self.left = left
        self.right = width - right
        self.sx = S.Scale(0, self.t_end, left, self.right)
        self.parts = []
        self.y = 8
        self.top_panels = None
        self.t_label = t_label
        self.mark_list = []
        self.panels = []
        if title:
            self.parts.append(S.text(left, self.y + 14, title, size=15,
                                     font_weight="bold", class_="title"))
            self.y += 24
        xt, _ = S.ticks(0, self.t_end, max(2, int((self.right - left) / 90)))
        self.xticks = xt

    # ------------------------------------------------------------ marks
    def marks(self, marks):
        """Vertical marks; their labels get lanes above the panels."""
        self.mark_list = list(marks)
        if not marks:
            return
        spans = []
        for m in self.mark_list:
            x = self.sx(m.t)
            w = S.text_width(m.label) + 8
            x0 = x - 3 if x + w <= self.right else x - w + 3
            spans.append((x0, x0 + w))
        lane_of = S.lanes(spans, gap=6)
        self._mark_lanes = lane_of
        self._mark_spans = spans
        self._mark_y0 = self.y
        self.y += (max(lane_of) + 1) * 16 + 4

    def _draw_marks(self, bottom):
        out = []
        for m, lane, (x0, x1) in zip(self.mark_list, self._mark_lanes,
                                     self._mark_spans):
            x = self.sx(m.t)
            ly = self._mark_y0 + lane * 16 + 12
            anchor_x = x0 + 4
            data = " ".join(f"data-{k}={quoteattr(str(v))}"
                            for k, v in m.data.items())
            out.append(f'<g class="mark {m.cls}" {data}>'
                       f"<title>{S.escape(m.title)}</title>")
            out.append(S.el("line", x1=x, y1=ly + 3, x2=x, y2=bottom,
                            stroke=m.color, stroke_width=1.5,
                            stroke_dasharray="5 3"))
            out.append(S.text(anchor_x, ly, m.label, fill=m.color,
                              font_weight="bold"))
            out.append("</g>")
        return "".join(out)

    # ------------------------------------------------------------ panels
    def panel(self, name, height, legend_items, y_domain=None, yfmt=None,
              yticks=None, log=False, unit=""):
        """A titled panel with its legend above and y axis at the left."""
        if self.top_panels is None:
            self.top_panels = self.y
        self.y += 6
        head = S.text(8, self.y + 13, name, font_weight="bold",
                      class_="panel-title")
        self.parts.append(head)
        lx = 8 + S.text_width(name) + 20
        lg, lh = S.legend(max(self.left, lx), self.y,
                          self.right - max(self.left, lx), legend_items)
        self.parts.append(lg)
        self.y += max(lh, 18) + 4
        y0, y1 = self.y, self.y + height
        if y_domain is None:
            y_domain = (0, 1)
        if log:
            sy = S.LogScale(y_domain[0], y_domain[1], y1, y0)
        else:
            sy = S.Scale(y_domain[0], y_domain[1], y1, y0)
        p = Panel(self, name, y0, y1, sy)
        g = [f'<g class="panel" data-name={quoteattr(name)}>']
        g.append(S.el("rect", x=self.left, y=y0, width=self.right - self.left,
                      height=height, fill="#fff", stroke="#ccc"))
        for t in self.xticks:
            x = self.sx(t)
            g.append(S.el("line", x1=x, y1=y0, x2=x, y2=y1, stroke=GRID))
        if yticks is not None:
            g.append('<g class="axis y-axis">')
            last_y = None
            for v in yticks:
                yy = sy(v)
                if last_y is not None and abs(last_y - yy) < 14:
                    continue
                last_y = yy
                g.append(S.el("line", x1=self.left, y1=yy, x2=self.right,
                              y2=yy, stroke=GRID))
                g.append(S.el("line", x1=self.left - 4, y1=yy, x2=self.left,
                              y2=yy, stroke=AXIS))
                g.append(S.text(self.left - 6, yy + 4,
                                (yfmt or str)(v), anchor="end", size=11))
            g.append("</g>")
        g.append("</g>")
        self.parts.append("".join(g))
        p.parts = self.parts
        self.panels.append(p)
        self.y = y1
        return p

    def finish(self):
        bottom = self.y
        out = []
        out.extend(self.parts)
        if self.mark_list:
            out.append(self._draw_marks(bottom))
        # the shared time axis
        ax = ['<g class="axis x-axis">']
        ax.append(S.el("line", x1=self.left, y1=bottom, x2=self.right,
                       y2=bottom, stroke=AXIS))
        for t in self.xticks:
            x = self.sx(t)
            ax.append(S.el("line", x1=x, y1=bottom, x2=x, y2=bottom + 5,
                           stroke=AXIS))
            ax.append(S.text(x, bottom + 18, f"{t:g}", anchor="middle",
                             size=11, class_="tick"))
        ax.append(S.text((self.left + self.right) / 2, bottom + 36,
                         self.t_label, anchor="middle",
                         class_="axis-label"))
        ax.append("</g>")
        out.append("".join(ax))
        h = bottom + 46
        return (f'<svg xmlns="http://www.w3.org/2000/svg" '
                f'width="{self.width}" height="{h:.0f}" '
                f'viewBox="0 0 {self.width} {h:.0f}" '
                f'font-family="DejaVu Sans, Verdana, sans-serif" '
                f'font-size="{S.FONT}">' + "".join(out) + "</svg>")
