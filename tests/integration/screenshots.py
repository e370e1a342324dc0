#!/usr/bin/env python3
"""The README's pictures, from real runs (root, under the itest lock):

  tests/integration/screenshots.py [OUTDIR]     (default docs/img)

report.png: ramcache-report of the record test_report.py makes, in
headless Chromium. top.png: ramcache-top in tmux on a live demo run, its
pane captured with colours (capture-pane -e) and drawn as HTML.
"""
import html
import os
import re
import shutil
import subprocess
import sys
import time

import cdp  # noqa: E402
import test_report as tr  # noqa: E402
from rctest import DEMO, AGENT, Memcg, wait_page  # noqa: E402

COLORS = ["#000", "#c33", "#3a3", "#c90", "#36c", "#a3a", "#3aa", "#ccc"]


def ansi_html(text):
    """tmux capture-pane -e output (SGR only) as HTML spans."""
    out = []
    fg = bg = None
    bold = rev = False
    pos = 0
    for m in re.finditer(r"\x1b\[([0-9;]*)m", text):
        out.append(span(text[pos:m.start()], fg, bg, bold, rev))
        pos = m.end()
        codes = [int(c) if c else 0 for c in m.group(1).split(";")]
        for c in codes:
            if c == 0:
                fg = bg = None
                bold = rev = False
            elif c == 1:
                bold = True
            elif c == 7:
                rev = True
            elif c == 22:
                bold = False
            elif c == 27:
                rev = False
            elif 30 <= c <= 37:
                fg = COLORS[c - 30]
            elif c == 39:
                fg = None
            elif 40 <= c <= 47:
                bg = COLORS[c - 40]
            elif c == 49:
                bg = None
    out.append(span(text[pos:], fg, bg, bold, rev))
    return "".join(out)


def span(s, fg, bg, bold, rev):
    if not s:
        return ""
    f, b = fg or "#ddd", bg or "#1e1e1e"
    if rev:
        f, b = b, f
    style = f"color:{f};background:{b}" + (";font-weight:bold" if bold
                                           else "")
    return f'<span style="{style}">{html.escape(s)}</span>'


def top_png(out):
    rec = os.path.join(tr.work(), "shot.jsonl")
    with Memcg(tr.LIMIT) as cg, tr.Tmux() as tm:
        mdir = os.path.join(tr.work(), "shot")
        os.makedirs(mdir, exist_ok=True)
        demo = subprocess.Popen(
            [DEMO, "--json", "--policy", "agent", "--wait-agent", "30",
             "--model-dir", mdir, *map(str, tr.WORKLOAD)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=cg.preexec())
        try:
            wait_page(demo.pid, timeout=4)  # its memfd page, then the agent
            tm.keys("ramcache-top() { " + sys.executable + " " + tr.TOP
                    + ' "$@"; }; clear', "Enter")
            tm.keys(f"ramcache-top --agent {AGENT} --record {rec} --pid "
                    f"{demo.pid} " + " ".join(tr.AGENT_FLAGS), "Enter")
            tm.wait_screen(lambda s: len(re.findall(
                r"\bevicted +\d", s)) >= 8, 60)
            time.sleep(1.1)
            pane = subprocess.run(["tmux", "capture-pane", "-e", "-p", "-t",
                                   tm.name], capture_output=True,
                                  text=True, check=True).stdout
            demo.wait(90)
            tm.keys("q")
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    page = os.path.join(tr.work(), "top.html")
    with open(page, "w") as f:
        f.write('<!DOCTYPE html><html><head><meta charset="utf-8"><style>'
                "body{margin:0;background:#1e1e1e}"
                "pre{font:14px/1.25 'DejaVu Sans Mono',monospace;"
                "margin:10px;color:#ddd}</style></head><body><pre>"
                + ansi_html(pane.rstrip("\n")) + "</pre></body></html>")
    with cdp.Browser(width=1000, height=300) as b:
        b.screenshot("file://" + page, out)
        assert not b.problems, b.problems


def report_png(out):
    rec = tr.record()
    page = os.path.join(tr.work(), "report.html")
    tr.render(rec, page)
    with cdp.Browser(width=1240, height=900) as b:
        b.screenshot("file://" + page, out)
        assert not b.problems, b.problems


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        tr.ROOT, "docs", "img")
    os.makedirs(outdir, exist_ok=True)
    try:
        report_png(os.path.join(outdir, "report.png"))
        top_png(os.path.join(outdir, "top.png"))
    finally:
        shutil.rmtree(tr.work(), ignore_errors=True)
    for n in ("report.png", "top.png"):
        print(os.path.join(outdir, n), cdp.png_size(os.path.join(outdir, n)))


if __name__ == "__main__":
    main()
