"""The report: one self-contained HTML page (inline CSS and SVG, no
scripts, nothing fetched)."""
import html
import os

from . import svg as S
from .record import summarize
from .timeline import report_svg

CSS = """
body { font-family: DejaVu Sans, Verdana, sans-serif; margin: 16px 24px;
       color: #222; background: #fafafa; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 22px 0 6px 0; }
.meta { color: #555; font-size: 13px; margin-bottom: 10px; }
.chart { background: #fff; border: 1px solid #ddd; display: inline-block; }
table { border-collapse: collapse; font-size: 13px; margin: 0 24px 14px 0;
        background: #fff; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
.tables { display: flex; flex-wrap: wrap; align-items: flex-start; }
.note { color: #555; font-size: 12px; max-width: 1200px; }
.warn { color: #a00; }
"""


# Nothing is loaded, run, submitted or resolved against another base:
# whatever a crafted record might still slip through has nowhere to go.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
       "form-action 'none'; base-uri 'none'")


def _table(caption, head, rows, cls=""):
    out = [f'<table class="{cls}"><caption><b>{html.escape(caption)}'
           "</b></caption><tr>"]
    out += [f"<th>{html.escape(h)}</th>" for h in head]
    out.append("</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>"
                                    for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _lat_row(name, st):
    return [name, st["n"], S.fmt_ms(st["p50"]), S.fmt_ms(st["p90"]),
            S.fmt_ms(st["p99"]), S.fmt_ms(st["max"])]


def _meta(tl, source):
    """The record's line under the title: source, length, whom."""
    st = tl.start
    who = ", ".join(f"{c or '?'} ({p})" for p, c in sorted(tl.comms.items()))
    meta = [f"record <code>{html.escape(os.path.basename(source))}</code>",
            f"{tl.events} events over {tl.duration:.1f} s"]
    if who:
        meta.append(f"executors: {html.escape(who)}")
    elif st:
        meta.append("the whole system")
    if st.get("memcg"):
        ver = html.escape(str(st.get("cgroup_version", "?")))
        meta.append(f"memory cgroup <code>{html.escape(str(st['memcg']))}"
                    f"</code> (v{ver})")
    if tl.thresholds:
        meta.append("thresholds: headroom "
                    f"{S.fmt_bytes(tl.thresholds.get('headroom'))}, "
                    f"inactive {S.fmt_bytes(tl.thresholds.get('inactive'))}")
    if tl.exit:
        meta.append(f"agent exit: {html.escape(str(tl.exit.get('reason')))}")
    return meta


def _warnings(tl):
    """What the reader must know the record misses."""
    st = tl.start
    warn = []
    if tl.bad_lines:
        warn.append(f"{tl.bad_lines} line(s) of the record were not JSON "
                    "events (cut short?) and were skipped")
    if tl.bad_numbers:
        warn.append(f"{tl.bad_numbers} field(s) of the record held no number "
                    "the agent writes (not finite, negative, 2^64 or more, "
                    "or not a number) and were left out")
    if not st:
        warn.append("the record has no start event: time 0 is its first "
                    "event")
    if tl.drops:
        warn.append(f"the ring buffer dropped {tl.drops} kernel event(s): "
                    "the stalls and RSS shown miss them")
    return warn


def _tables(tl, sm):
    """The summary's tables, as HTML."""
    tables = []
    by = sm["by_status"]
    tables.append(_table(
        "Evictions", ["status", "commands"],
        sorted(by.items()) + [["total", sm["evictions"]]], "evictions"))
    tables.append(_table(
        "Eviction latency", ["from post to", "n", "p50", "p90", "p99", "max"],
        [_lat_row("executor received", sm["post_to_recv"]),
         _lat_row("ack", sm["post_to_ack"]),
         _lat_row("RSS drop", sm["post_to_freed"])], "latency"))
    tables.append(_table(
        "Bytes", ["", "bytes"],
        [["asked to evict", S.fmt_bytes(sm["bytes_asked"])],
         ["freed (acked evicted)", S.fmt_bytes(sm["bytes_freed"])]],
        "bytes"))
    tables.append(_table(
        "Reclaim stalls", ["kind", "n", "total", "p50", "p99", "max"],
        [[k, v["n"], S.fmt_ms(v["total_ms"]), S.fmt_ms(v["p50"]),
          S.fmt_ms(v["p99"]), S.fmt_ms(v["max"])]
         for k, v in sm["stalls"].items()], "stalls"))
    tables.append(_table(
        "Kernel and agent", ["", "count"],
        [["kswapd wake-ups", sm["kswapd_wakes"]],
         ["OOM kills", sm["ooms"]],
         ["events dropped (ring buffer)", sm["drops"]],
         ["agent warnings", sm["warnings"]]], "counts"))
    if tl.ooms:
        tables.append(_table(
            "OOM kills", ["time", "pid", "comm", "uid", "anon", "file",
                          "shmem"],
            [[f"{o.t:.3f} s", o.victim_pid, o.comm, o.uid,
              S.fmt_bytes(o.anon), S.fmt_bytes(o.file),
              S.fmt_bytes(o.shmem)] for o in tl.ooms], "ooms"))
    if tl.warnings:
        tables.append(_table(
            "Agent warnings and errors", ["time", "message"],
            [[f"{t:.3f} s", m] for t, m in tl.warnings[:50]], "warnings"))
    return tables


def render(tl, source="record"):
    meta = _meta(tl, source)
    warn = _warnings(tl)
    tables = _tables(tl, summarize(tl))

    title = "ramcache-bpf report"
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title>",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<style>{CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<div class="meta">{" &middot; ".join(meta)}</div>',
    ]
    for w in warn:
        body.append(f'<div class="meta warn">{html.escape(w)}</div>')
    body += [
        '<div class="chart">', report_svg(tl), "</div>",
        '<p class="note">Time is seconds since the agent started. Hover '
        "over a band, an eviction, a stall or a mark for details. Each "
        "eviction starts at its post (dot): the thick bar runs to the "
        "executor's ack, the thin one on to the RSS drop the kernel "
        "reported, so length is latency. Headroom is the tighter of "
        "MemAvailable and the cgroup's limit - usage + inactive file; "
        "the forecast is where the agent expected it one --horizon "
        "ahead.</p>",
        "<h2>Summary</h2>",
        '<div class="tables">', "".join(tables), "</div>",
        "</body></html>",
    ]
    return "\n".join(body) + "\n"
