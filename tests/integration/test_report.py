#!/usr/bin/env python3
"""ramcache-report and ramcache-top on a record of a real demo run.

The record is what users keep: the agent's `--json` stream in a file. It
is made once here, for real: the agent follows, with --match, two runs of
build/ramcache-demo in one scratch memory cgroup (384 MiB, no swap): first
under the agent (evictions), then as the classic cache (OOM-killed). The
report drawn from it is checked element by element, then opened in headless
Chromium through the DevTools protocol (console errors fail the test).
ramcache-top is driven in tmux on a second, live demo run.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from rctest import (AGENT, DEMO, ROOT, MiB, Memcg, Skip, Tmux,  # noqa: E402
                    import_package, main, require_root, test, wait_page)

RCVIZ = os.path.join(ROOT, "report", "rcviz")

REPORT = os.path.join(ROOT, "report", "ramcache-report")
TOP = os.path.join(ROOT, "report", "ramcache-top")

LIMIT = 384 * MiB
WORKLOAD = ["--prompts", 8, "--nodes", 6, "--models", 2, "--model-size",
            "96M", "--output-size", "16M", "--steps", 10, "--step-ms", 20]
AGENT_FLAGS = ["--headroom", "64M", "--inactive", "128M",
               "--interval", "250ms"]
SVG = "{http://www.w3.org/2000/svg}"

_work = None


def work():
    global _work
    if _work is None:
        _work = tempfile.mkdtemp(prefix="ramcache-test-report-",
                                 dir="/var/tmp")
    return _work


def read_events(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("{") and line.endswith("\n"):
                out.append(json.loads(line))
    return out


def wait_event(path, pred, timeout, proc=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for e in read_events(path):
            if pred(e):
                return e
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    return None


def gated_demo(cg, tag, *args):
    """The demo behind a shell waiting for a line, so that the agent has
    attached to its pid (kept across exec) before it allocates."""
    argv = ["/bin/sh", "-c", 'read x; exec "$@"', "sh", DEMO, "--json",
            "--model-dir", os.path.join(work(), tag), *map(str, WORKLOAD),
            *map(str, args)]
    os.makedirs(os.path.join(work(), tag), exist_ok=True)
    return subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            preexec_fn=cg.preexec())


def run_gated(rec, agent, demo, timeout=90):
    attached = wait_event(rec, lambda e: e.get("type") == "target" and
                          e.get("state") == "attached" and
                          e.get("pid") == demo.pid, 20, agent)
    assert attached, f"the agent never attached to {demo.pid}"
    demo.stdin.write(b"go\n")
    demo.stdin.close()
    try:
        return demo.wait(timeout)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


_record = None


def record():
    """The record of two real demo runs (made once), its path."""
    global _record
    if _record:
        return _record
    require_root()
    for b in (DEMO, AGENT):
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"{b} is not built")
    rec = os.path.join(work(), "record.jsonl")
    with Memcg(LIMIT) as cg, open(rec, "w") as out:
        agent = subprocess.Popen(
            [AGENT, "--json", "--match", work(), *AGENT_FLAGS],
            stdout=out, stderr=subprocess.PIPE)
        try:
            d1 = gated_demo(cg, "agent", "--policy", "agent",
                            "--wait-agent", 30)
            rc1 = run_gated(rec, agent, d1)
            assert rc1 == 0, f"the demo under the agent: exit {rc1}"
            gone = wait_event(rec, lambda e: e.get("type") == "target" and
                              e.get("state") == "exited" and
                              e.get("pid") == d1.pid, 10, agent)
            assert gone, "the agent did not see the first run exit"
            d2 = gated_demo(cg, "classic", "--policy", "none")
            rc2 = run_gated(rec, agent, d2)
            assert rc2 == -signal.SIGKILL, f"the classic cache: exit {rc2}"
            kills = cg.oom_kills()
            assert kills >= 1, f"the classic cache got SIGKILL, the " \
                f"cgroup counts {kills} OOM kills"
            assert wait_event(rec, lambda e: e.get("type") == "oom_kill"
                              and e.get("victim_pid") == d2.pid, 10), \
                "no oom_kill event for the classic cache"
        finally:
            if agent.poll() is None:
                agent.send_signal(signal.SIGINT)
            try:
                agent.wait(15)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
    _record = rec
    return rec


# ------------------------------------------------------------ the report

def render(rec, out):
    p = subprocess.run([sys.executable, REPORT, rec, "-o", out],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        return f.read()


def svg_of(doc):
    m = re.search(r"<svg .*?</svg>", doc, re.S)
    assert m, "no inline SVG in the report"
    return ET.fromstring(m.group(0))


def classes(el):
    return (el.get("class") or "").split()


def find_class(root, cls, tag="g"):
    return [e for e in root.iter(SVG + tag) if cls in classes(e)]


def x_scale(root):
    """Pixels per second and x of 0 s, from the time axis' tick labels."""
    axis = find_class(root, "x-axis")
    assert len(axis) == 1, "one shared time axis"
    ticks = [(float(t.text), float(t.get("x")))
             for t in axis[0].iter(SVG + "text") if "tick" in classes(t)]
    assert len(ticks) >= 3, f"time axis ticks: {ticks}"
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    pps = (x1 - x0) / (v1 - v0)
    return pps, x0 - v0 * pps


def check_record(events):
    # the record: every line on the one clock, thresholds per target
    assert all(isinstance(e.get("ts_ns"), int) for e in events), \
        [e["type"] for e in events if "ts_ns" not in e][:5]
    thr = {(e.get("threshold_headroom"), e.get("threshold_inactive"))
           for e in events if e["type"] == "summary" and e.get("pid")}
    assert thr == {(64 * MiB, 128 * MiB)}, thr
    assert any("forecast" in e for e in events if e["type"] == "summary"), \
        "no summary carries a forecast"


def check_evictions(root, events, t0, pps, x0):
    # every eviction command of the record, where it was posted, its
    # status, and post -> ack as the length of its bar
    posted = {(e["pid"], e["seq"]): e for e in events
              if e["type"] == "evict" and "seq" in e}
    done = {(e["pid"], e["seq"]): e for e in events
            if e["type"] == "evict_done"}
    assert len(posted) >= 5, f"only {len(posted)} evictions recorded"
    drawn = {(int(g.get("data-pid")), int(g.get("data-seq"))): g
             for g in find_class(root, "evict")}
    assert set(drawn) == set(posted), (
        f"missing {sorted(set(posted) - set(drawn))}, "
        f"extra {sorted(set(drawn) - set(posted))}")
    for key, e in posted.items():
        g = drawn[key]
        t_post = (e["ts_ns"] - t0) / 1e9
        assert abs(float(g.get("data-t-post")) - t_post) < 1e-5, \
            (key, g.get("data-t-post"), t_post)
        dot = g.find(SVG + "circle")
        assert abs(float(dot.get("cx")) - (x0 + t_post * pps)) < 1.0, \
            (key, dot.get("cx"), x0 + t_post * pps)
        d = done.get(key)
        assert g.get("data-status") == (d["status"] if d else ""), \
            (key, g.get("data-status"), d)
        if d and d.get("ack_latency_ns"):
            bar = [ln for ln in g.iter(SVG + "line")
                   if "ack" in classes(ln)]
            assert bar, f"no post -> ack bar for {key}"
            length = float(bar[0].get("x2")) - float(bar[0].get("x1"))
            assert abs(length - d["ack_latency_ns"] / 1e9 * pps) < 0.2, \
                (key, length, d["ack_latency_ns"])
        title = g.find(SVG + "title").text
        assert title.startswith(f"#{key[1]} "), (key, title)
    return done


def check_oom_kills(root, events, t0, pps, x0):
    # the OOM kill of the classic cache: a mark at its time, with its name
    ooms = [e for e in events if e["type"] == "oom_kill"]
    marks = find_class(root, "oom")
    assert len(marks) == len(ooms) >= 1, \
        f"{len(marks)} OOM marks drawn for {len(ooms)} oom_kill events"
    for e, m in zip(ooms, marks):
        assert int(m.get("data-pid")) == e["victim_pid"], (m.attrib, e)
        assert m.get("data-comm") == e["comm"], (m.attrib, e)
        line = m.find(SVG + "line")
        assert abs(float(line.get("x1")) -
                   (x0 + (e["ts_ns"] - t0) / 1e9 * pps)) < 1.0, \
            (line.get("x1"), x0 + (e["ts_ns"] - t0) / 1e9 * pps, e)
        assert f"OOM kill: {e['comm']} ({e['victim_pid']})" in \
            m.find(SVG + "text").text, (m.find(SVG + "text").text, e)
    return ooms


def check_stalls_and_levels(root, events):
    # every reclaim stall; the pressure level with its reasons
    stalls = [e for e in events if e["type"] == "reclaim"]
    drawn_stalls = len(find_class(root, "stall"))
    assert drawn_stalls == len(stalls), \
        f"{drawn_stalls} stalls drawn for {len(stalls)} reclaim events"
    bands = find_class(root, "level", "rect")
    assert bands, "no pressure level band"
    assert all(b.find(SVG + "title") is not None for b in bands), \
        "a level band without its title"
    reasons = set()
    for e in events:
        if e["type"] == "pressure":
            reasons |= set(e["reasons"])
    drawn_reasons = set()
    for b in bands:
        drawn_reasons |= set(filter(None, b.get("data-reasons").split(",")))
    assert reasons <= drawn_reasons, (reasons, drawn_reasons)


def check_legends(root, events):
    # legends name what is drawn, y axes have labelled ticks
    names = {i.get("data-name") for i in find_class(root, "legend-item")}
    pids = sorted({e["pid"] for e in events if e["type"] == "rss"})
    want = {"cgroup usage", "cgroup limit", "headroom", "evicted",
            "memcg reclaim", "MemAvailable (system)", "critical",
            "forecast (--horizon ahead)", "evict below (--headroom)",
            "evict inactive below (--inactive)",
            *(f"RSS ramcache-demo ({p})" for p in pids)}
    assert want <= names, want - names
    yaxes = find_class(root, "y-axis")
    ylabels = [[t.text for t in a.iter(SVG + "text")] for a in yaxes]
    assert len(yaxes) >= 4, ylabels
    assert all(len(t) >= 2 for t in ylabels), ylabels
    assert any(t.endswith("MiB") for a in ylabels for t in a), ylabels


def check_tables(doc, done, ooms):
    # the tables: counts and the p50 computed here from the record
    ack = sorted(d["ack_latency_ns"] / 1e6 for d in done.values()
                 if "ack_latency_ns" in d)
    p50 = ack[(len(ack) + 1) // 2 - 1]
    row = re.search(r"<tr><td>ack</td><td>(\d+)</td><td>([^<]+)</td>", doc)
    assert row, "no ack row in the latency table"
    assert int(row.group(1)) == len(ack), (row.group(0), len(ack))
    assert row.group(2) == rcviz_fmt_ms(p50), (row.group(2), p50)
    assert f"<td>{ooms[-1]['victim_pid']}</td>" in doc, \
        f"OOM victim {ooms[-1]['victim_pid']} not in the OOM table"


@test
def report_draws_every_eviction_and_the_oom_kill():
    rec = record()
    events = read_events(rec)
    check_record(events)
    t0 = [e for e in events if e["type"] == "start"][0]["ts_ns"]
    out = os.path.join(work(), "report.html")
    doc = render(rec, out)
    # self-contained: nothing fetched, no scripts
    assert "<script" not in doc.lower(), "a script in the report"
    assert not re.search(r"\b(src|href)=", doc), "external reference"
    assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg)", doc)
    root = svg_of(doc)
    pps, x0 = x_scale(root)
    labels = [t.text for a in find_class(root, "x-axis")
              for t in a.iter(SVG + "text")]
    assert "time since start (s)" in labels, labels
    done = check_evictions(root, events, t0, pps, x0)
    ooms = check_oom_kills(root, events, t0, pps, x0)
    check_stalls_and_levels(root, events)
    check_legends(root, events)
    check_tables(doc, done, ooms)

@test
def top_draws_a_command_whose_post_it_did_not_see():
    """ramcache-top started on a running agent's stream: a command's end
    whose post came before (timed out, so no ack) is drawn and counted."""
    import_package(RCVIZ)
    from rcviz import live
    st = live.Live()
    for e in ({"type": "start", "ts_ns": 1000},
              {"type": "evict_done", "ts_ns": 2000, "pid": 5, "seq": 3,
               "label": "vae", "status": "timeout"}):
        st.feed(e)
    lines = [text for text, _ in live.screen(st, 100, 40, "00:00:00")]
    assert [ln for ln in lines if "vae" in ln and "timeout" in ln], lines
    assert st.counts["lost"] == 1, st.counts


def rcviz_fmt_ms(v):
    import_package(RCVIZ)
    from rcviz.svg import fmt_ms
    return fmt_ms(v)


def no_overlap(boxes):
    boxes = sorted(boxes)
    for a, b in zip(boxes, boxes[1:]):
        if a[0] == b[0] and a[2] > b[1]:
            return False
    return True


@test
def report_labels_do_not_overlap():
    """Labels of marks (lanes) and of the time axis, with a record made
    up to crowd them: OOM kills 10 ms apart."""
    rec = os.path.join(work(), "crowded.jsonl")
    t0 = 10 ** 12
    with open(rec, "w") as f:
        f.write(json.dumps({"type": "start", "ts_ns": t0, "pid": 0}) + "\n")
        for i in range(6):
            f.write(json.dumps({"type": "oom_kill", "ts_ns": t0 + 10 ** 9 +
                                i * 10 ** 7, "victim_pid": 100 + i,
                                "comm": f"victim{i}", "anon_rss": i << 20,
                                "file_rss": 0, "shmem_rss": 0}) + "\n")
        f.write(json.dumps({"type": "exit", "ts_ns": t0 + 3 * 10 ** 9,
                            "reason": "interrupted", "code": 0}) + "\n")
    root = svg_of(render(rec, rec + ".html"))
    import_package(RCVIZ)
    from rcviz.svg import text_width
    boxes = []
    for m in find_class(root, "oom"):
        t = m.find(SVG + "text")
        x, y = float(t.get("x")), float(t.get("y"))
        boxes.append((y, x, x + text_width(t.text)))
    assert len(boxes) == 6
    assert no_overlap(boxes), boxes
    ticks = [t for a in find_class(root, "x-axis")
             for t in a.iter(SVG + "text") if "tick" in classes(t)]
    tb = [(0, float(t.get("x")) - text_width(t.text, 11) / 2,
           float(t.get("x")) + text_width(t.text, 11) / 2) for t in ticks]
    assert no_overlap(tb), tb


@test
def report_of_a_record_with_an_rss_line_of_no_pid():
    """An rss line whose pid is missing or not a number (a crafted or
    hand-edited record) is left out; the executor's RSS is still drawn."""
    rec = os.path.join(work(), "nopid.jsonl")
    with open(rec, "w") as f:
        f.write('{"type":"start","ts_ns":1000000000,"pid":7,"comm":"x"}\n')
        f.write('{"type":"rss","ts_ns":1500000000,"pid":7,"rss":1048576}\n')
        f.write('{"type":"rss","ts_ns":1600000000,"rss":2097152}\n')
        f.write('{"type":"rss","ts_ns":1700000000,"pid":"7","rss":1}\n')
    doc = render(rec, rec + ".html")
    names = {i.get("data-name")
             for i in find_class(svg_of(doc), "legend-item")}
    assert "RSS x (7)" in names, names
    assert not [n for n in names if "None" in n], names


@test
def report_of_a_cut_or_empty_record():
    rec = os.path.join(work(), "cut.jsonl")
    with open(rec, "w") as f:
        f.write('{"type":"start","ts_ns":1000000000,"pid":7,"comm":"x"}\n')
        f.write('{"type":"rss","ts_ns":1500000000,"pid":7,"rss":1048576}\n')
        f.write('{"type":"evict","ts_ns":1600000000,"pid":7,"seq":1,'
                '"id":3,"label":"a","bytes":4096}\n')
        f.write('{"type":"evict_do')  # the agent died mid-line
    doc = render(rec, rec + ".html")
    assert "1 line(s) of the record were not JSON" in doc
    root = svg_of(doc)
    g = find_class(root, "evict")
    assert len(g) == 1 and g[0].get("data-group") == "lost"
    empty = os.path.join(work(), "empty.jsonl")
    open(empty, "w").close()
    for bad, msg in ((empty, "holds no ramcache-bpf events"),
                     (os.path.join(work(), "nope"), "failed to read")):
        p = subprocess.run([sys.executable, REPORT, bad, "-o",
                            os.path.join(work(), "x.html")],
                           capture_output=True, text=True)
        assert p.returncode == 1 and msg in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([sys.executable, REPORT], capture_output=True,
                       text=True)
    assert p.returncode == 2


@test
def installed_programs_run_from_anywhere():
    """make install puts ramcache-report and ramcache-top in bin with their
    modules in lib/ramcache-bpf; they run from / on a record."""
    from rctest import OUTPUT
    dest = os.path.join(work(), "stage")
    p = subprocess.run(["make", "-s", "-C", ROOT, "install", f"DESTDIR={dest}",
                        "PREFIX=/usr", f"OUTPUT={OUTPUT}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = os.path.join(work(), "small.jsonl")
    with open(rec, "w") as f:
        f.write('{"type":"start","ts_ns":1000000000,"pid":7,"comm":"x"}\n'
                '{"type":"oom_kill","ts_ns":2000000000,"victim_pid":7,'
                '"comm":"x","anon_rss":1048576}\n'
                '{"type":"exit","ts_ns":3000000000,"reason":"done",'
                '"code":0}\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = os.path.join(work(), "installed.html")
    p = subprocess.run([os.path.join(dest, "usr/bin/ramcache-report"), rec,
                        "-o", out], cwd="/", env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert len(find_class(svg_of(open(out).read()), "oom")) == 1
    p = subprocess.run([os.path.join(dest, "usr/bin/ramcache-top"),
                        "--input", rec], cwd="/", env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "oom kills 1" in p.stdout, p.stderr


@test
def report_in_headless_chromium():
    """The report of the real record opens in Chromium without a console
    error or a network request, and every eviction is in its DOM."""
    import cdp
    if not cdp.chromium_path():
        raise RuntimeError("chromium is not installed (make deps)")
    rec = record()
    out = os.path.join(work(), "report.html")
    render(rec, out)
    n_evict = len([e for e in read_events(rec) if e["type"] == "evict"])
    # the check can fail: a page with an error is caught
    bad = os.path.join(work(), "bad.html")
    with open(bad, "w") as f:
        f.write("<html><body><script>undefined_function()</script>"
                "<img src='missing.png'></body></html>")
    png = os.path.join(work(), "report.png")
    with cdp.Browser() as b:
        b.screenshot("file://" + bad, os.path.join(work(), "bad.png"))
        assert len(b.problems) >= 2, b.problems
        b.problems.clear()
        w, h = b.screenshot("file://" + out, png)
        assert b.problems == [], b.problems
        assert b.evaluate("document.querySelectorAll('g.evict').length") \
            == n_evict
        assert b.evaluate("document.querySelectorAll('g.mark.oom').length") \
            >= 1
    pw, ph = cdp.png_size(png)
    assert (pw, ph) == (w, h) and pw >= 1200 and ph >= 900, (pw, ph)
    assert os.path.getsize(png) > 50000


# ------------------------------------------------------------ ramcache-top

def restored(tm, timeout=10):
    """ramcache-top gone and the terminal back: primary screen, prompt."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if tm.child() is None and tm.fmt("#{alternate_on}") == "0":
            return tm.screen().rstrip().endswith("$")
        time.sleep(0.1)
    return False


def top_cmd(*args):
    return " ".join([sys.executable, TOP, *map(str, args)])


@test
def top_on_a_running_demo_in_tmux():
    """ramcache-top runs the agent on a live demo run: level, headroom bar
    and eta, evictions with their latency; q restores the terminal and
    stops the agent; its --record is a record ramcache-report draws."""
    require_root()
    rec = os.path.join(work(), "top.jsonl")
    with Memcg(LIMIT) as cg, Tmux() as tm:
        mdir = os.path.join(work(), "top")
        os.makedirs(mdir, exist_ok=True)
        demo = subprocess.Popen(
            [DEMO, "--json", "--policy", "agent", "--wait-agent", "30",
             "--model-dir", mdir, *map(str, WORKLOAD)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=cg.preexec())
        try:
            wait_page(demo.pid, timeout=4)  # its memfd page, then the agent
            tm.keys(top_cmd("--agent", AGENT, "--record", rec, "--pid",
                            demo.pid, *AGENT_FLAGS), "Enter")
            s = tm.wait_screen(lambda s: re.search(
                r"\bevicted +\d+\.\d+ ms", s), 60)
            assert tm.fmt("#{alternate_on}") == "1", "not a full screen"
            assert re.search(r"^ramcache-top - \d\d:\d\d:\d\d", s, re.M), s
            assert re.search(r"^Level: (OK|WARN|HIGH|CRITICAL)", s, re.M), s
            row = re.search(rf"^ +{demo.pid} ramcache-demo .*MiB/384 MiB "
                            r".*\[[#.|]{10,}\] +(-|\d+\.\d s)$", s, re.M)
            assert row, s
            assert re.search(r"^Evictions: \d+ sent, \d+ evicted", s, re.M), s
            assert re.search(r"^Reclaim stalls: direct \d+", s, re.M), s
            assert re.search(r"^OOM kills: \d+", s, re.M), s
            agent = tm.child() and subprocess.run(
                ["pgrep", "-P", str(tm.child())], capture_output=True,
                text=True).stdout.split()
            assert agent, "ramcache-top runs no agent"
            assert demo.wait(90) == 0
            s = tm.wait_screen(lambda s: "agent exited" in s, 15)
            assert "agent exited: target exited" in s or \
                "agent exited" in s, s
            tm.keys("q")
            assert restored(tm), tm.screen()
            for p in agent:
                assert not os.path.exists(f"/proc/{p}/stat") or \
                    "Z" in open(f"/proc/{p}/stat").read().split()[2], p
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    events = read_events(rec)
    done = [e for e in events if e["type"] == "evict_done"]
    assert done and events[-1]["type"] == "exit"
    root = svg_of(render(rec, rec + ".html"))
    assert len(find_class(root, "evict")) == len(
        [e for e in events if e["type"] == "evict"])


@test
def top_restores_the_terminal_on_signals():
    """SIGTERM and SIGINT (C-c) leave a usable terminal; plain lines,
    without escape sequences, when stdout is not a terminal."""
    rec = record() if os.geteuid() == 0 else None
    if rec is None:
        raise Skip("needs root for the record")
    with Tmux() as tm:
        tm.keys(top_cmd("--input", rec), "Enter")
        s = tm.wait_screen(lambda s: "OOM kills: 1" in s, 15)
        assert "OOM kills: 1" in s and tm.fmt("#{alternate_on}") == "1", s
        os.kill(tm.child(), signal.SIGTERM)
        assert restored(tm), tm.screen()
        tm.keys("clear", "Enter")
        tm.keys(f"cat {rec} | " + top_cmd("--input", "-"), "Enter")
        s = tm.wait_screen(lambda s: "OOM kills: 1" in s, 15)
        assert "OOM kills: 1" in s and tm.fmt("#{alternate_on}") == "1", s
        tm.keys("C-c")
        assert restored(tm), tm.screen()
        # the agent it runs (whole system here) is stopped with it
        tm.keys("clear", "Enter")
        tm.keys(top_cmd("--agent", AGENT, "--no-evict"), "Enter")
        s = tm.wait_screen(lambda s: "following the whole system" in s
                           and "Level: " in s and "Level: ?" not in s, 20)
        assert "Level: " in s and tm.fmt("#{alternate_on}") == "1", s
        agent = subprocess.run(["pgrep", "-P", str(tm.child())],
                               capture_output=True, text=True).stdout.split()
        assert len(agent) == 1, agent
        tm.keys("C-c")
        assert restored(tm), tm.screen()
        end = time.monotonic() + 5
        while os.path.exists(f"/proc/{agent[0]}") and time.monotonic() < end:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{agent[0]}"), "agent left running"
    p = subprocess.run([sys.executable, TOP, "--input", rec],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout
    lines = p.stdout.splitlines()
    ooms = [e for e in read_events(rec) if e["type"] == "oom_kill"]
    assert any(f"OOM kill: pid {ooms[0]['victim_pid']} " in ln
               for ln in lines), lines
    n = len([e for e in read_events(rec) if e["type"] == "evict"])
    assert re.search(rf"\| evictions {n} \(\d+ evicted, \d+ busy, \d+ "
                     r"lost, last ack [\d.]+ ms\) \| .*oom kills 1$",
                     lines[-1]), lines[-1]
    p = subprocess.run([sys.executable, TOP, "--bogus"],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, "RAMCACHE_BPF": AGENT})
    assert p.returncode == 2 and "ramcache-bpf:" in p.stderr, p.stderr


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "record":
    shutil.copy(record(), sys.argv[2])
    shutil.rmtree(work(), ignore_errors=True)
    sys.exit(0)

if __name__ == "__main__":
    try:
        main()
    finally:
        if _work:
            shutil.rmtree(_work, ignore_errors=True)
