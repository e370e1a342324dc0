#!/usr/bin/env python3
"""The viewers (ramcache-report, ramcache-top) against what a hostile user
controls besides text (test_hostile_text.py has the text): the numbers of
a record, the terminal ramcache-top draws on, a shared folder the report
is written to.

* Numbers: the agent writes every number as a u64 (a double for rates and
  eta_s). A record may hold anything else: inf, -inf, nan, 1e999, a
  401-digit integer, a negative number, a string, a list, a bool. Each is
  put in every numeric field of every event, alone and all at once, and
  both viewers are run on it: the report is written, the exit status is
  that of a normal record, the refused numbers are counted and shown.
* The terminal: ramcache-top in curses mode whose tmux session is killed,
  or whose `script` wrapper gets SIGKILL: it exits at once, quietly.
* A shared folder: a link planted at the name the report used for its
  temporary file (`<output>.tmp`), or at the output itself, or at
  ramcache-top's --record, is never followed.
"""
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from rctest import (NOBODY, ROOT, MiB, Tmux, import_package, main,  # noqa: E402
                    require_root, test)

import_package(os.path.join(ROOT, "report", "rcviz"))
from rcviz import live, page, record  # noqa: E402

REPORT = os.path.join(ROOT, "report", "ramcache-report")
TOP = os.path.join(ROOT, "report", "ramcache-top")

# JSON text the agent never writes where it writes a number, refused
# wherever a number is read; json.loads takes every one of them.
REFUSED = ("1e999", "-1e999", "Infinity", "-Infinity", "NaN", "9" * 401,
           "-" + "9" * 401, "-1", "-0.5", str(1 << 64),
           "1.7976931348623157e308", '"12"', "[1]", '{"a":1}', "true")
# numbers in bounds where any number is read, refused where an integer is
# (a float below 1e-9 reads as 0)
FLOATS = ("0.0", "1e-9", "5e-324", "2.5")
# in bounds everywhere (null: the agent writes a double that is not
# finite so)
EDGES = ("0", str((1 << 64) - 1), "null")
INT_FIELDS = {"pid", "tid", "seq", "nid", "victim_pid", "uid", "code"}


def template():
    """Every event type the viewers read, with every field they read as a
    number (a plausible value each; an entry's id is shown as text):
    (type, {field: value})."""
    t = [10 ** 12]

    def ev(typ, **kw):
        t[0] += 10 ** 8
        return typ, dict(ts_ns=t[0], **kw)

    return [
        ev("start", pid=4242, comm="x", headroom=64 * MiB,
           inactive=128 * MiB),
        ev("target", state="attached", pid=4242, comm="x",
           headroom=64 * MiB, inactive=128 * MiB),
        ev("rss", pid=4242, rss=300 * MiB),
        ev("summary", pid=4242, rss=300 * MiB, memcg_usage=320 * MiB,
           memcg_limit=384 * MiB, mem_available=2048 * MiB,
           headroom=60 * MiB, forecast=40 * MiB, eta_s=1.5, drops=3,
           level="warn", threshold_headroom=64 * MiB,
           threshold_inactive=128 * MiB),
        ev("pressure", pid=4242, level="high", eta_s=0.5,
           headroom=30 * MiB),
        ev("evict", pid=4242, seq=1, label="a", bytes=16 * MiB,
           headroom=30 * MiB, forecast=20 * MiB),
        ev("evict_done", pid=4242, seq=1, status="evicted",
           bytes_freed=16 * MiB, ack_latency_ns=2_000_000,
           recv_latency_ns=1_000_000, freed_latency_ns=3_000_000),
        ev("evict_done", pid=4242, seq=2, status="timeout", bytes=MiB,
           ack_latency_ns=5_000_000_000, freed_latency_ns=1),
        ev("reclaim", pid=4242, tid=4243, kind="direct",
           latency_ns=4_000_000, nr_reclaimed=32),
        ev("kswapd", nid=0, state="wake"),
        ev("kswapd", nid=0, state="sleep"),
        ev("oom_kill", victim_pid=4343, comm="y", uid=1000,
           anon_rss=100 * MiB, file_rss=MiB, shmem_rss=0),
        ev("warning", message="w"),
        ev("error", message="e"),
        ev("target", state="exited", pid=4242, comm="x"),
        ev("exit", reason="done", code=0),
    ]


def numeric(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def line(typ, fields, swap=None, token=None):
    """One JSON line; the numeric fields in @swap (all when "all") hold
    the raw JSON text @token."""
    parts = [f'"type":{json.dumps(typ)}']
    for k, v in fields.items():
        hit = numeric(v) and (swap == "all" or k in (swap or ()))
        parts.append(f"{json.dumps(k)}:{token if hit else json.dumps(v)}")
    return "{" + ",".join(parts) + "}\n"


def record_text(token, swap="all"):
    return "".join(line(typ, f, swap, token) for typ, f in template())


def numeric_fields():
    """(index, type, field) of every numeric field of the template."""
    return [(i, typ, k) for i, (typ, f) in enumerate(template())
            for k, v in f.items() if numeric(v)]


def view_in_process(text):
    """What both viewers make of a record, in this process: the report's
    page, ramcache-top's screen and status line."""
    events, bad = record.parse_lines(text.splitlines())
    tl = record.build(events)
    tl.bad_lines += bad
    doc = page.render(tl, "crafted.jsonl")
    st = live.Live()
    for e in events:
        st.feed(e)
    live.screen(st, 120, 40, "00:00:00")
    live.status_line(st, "00:00:00")
    return tl, st, doc


def refused_by(token, k):
    """How many of the two viewers should refuse @token in field @k: 0,
    or 1 and 2 (a field one of them does not read)."""
    if token in EDGES or (token in FLOATS and k not in INT_FIELDS):
        return {0}
    return {1, 2}


@test
def every_number_in_every_field_is_bounded_in_process():
    """Each hostile value in each numeric field, one at a time: both
    viewers' pure code gives a page, a screen and a status line, and
    counts the field as refused where a number out of bounds was read."""
    fields = numeric_fields()
    assert len(fields) >= 50, len(fields)
    for token in REFUSED + FLOATS + EDGES:
        for i, typ, k in fields:
            lines = record_text("0", swap=()).splitlines(True)
            lines[i] = line(typ, template()[i][1], {k}, token)
            try:
                tl, st, _ = view_in_process("".join(lines))
            except Exception as e:
                raise AssertionError(f"{typ}.{k} = {token[:20]}: "
                                     f"{type(e).__name__}: {e}") from e
            n = (tl.bad_numbers, st.bad_numbers)
            assert max(n) <= 1 and sum(n) in refused_by(token, k), \
                (typ, k, token[:20], n)


def run(argv, **kw):
    p = subprocess.run([sys.executable, *argv], capture_output=True,
                       text=True, timeout=60, **kw)
    assert "Traceback" not in p.stderr, (argv, p.stderr[-2000:])
    return p


@test
def report_and_top_survive_a_record_of_hostile_numbers():
    """The review's two records (headroom 1e999; a ts_ns of 401 digits),
    then each hostile value in every numeric field at once: the report is
    written (exit 0) and says how many numbers it left out; ramcache-top
    --input prints its status line and exits 0."""
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        cases = [
            ("review-headroom", '{"type":"summary","ts_ns":2,"pid":0,'
             '"headroom":1e999}\n{"type":"exit","ts_ns":3}\n', 1),
            ("review-ts", '{"type":"start","ts_ns":' + "9" * 401 + '}\n'
             '{"type":"exit","ts_ns":5}\n', 1)]
        cases += [(f"all-{i}", record_text(tok), None)
                  for i, tok in enumerate(REFUSED)]
        for name, text, n_bad in cases:
            rec = os.path.join(d, name + ".jsonl")
            with open(rec, "w") as f:
                f.write(text)
            out = os.path.join(d, name + ".html")
            p = run([REPORT, rec, "-o", out])
            assert p.returncode == 0, (name, p.stderr)
            with open(out) as f:
                doc = f.read()
            m = re.search(r"(\d+) field\(s\) of the record held no "
                          r"number", doc)
            assert m, (name, "no count of the refused fields")
            assert n_bad is None or int(m.group(1)) == n_bad, (name, m[0])
            p = run([TOP, "--input", rec])
            assert p.returncode == 0, (name, p.stderr)
            assert "| oom kills " in p.stdout.splitlines()[-1], p.stdout
        # the same through stdin
        p = run([REPORT, "-", "-o", "-"], input=record_text("1e999"))
        assert p.returncode == 0 and "</html>" in p.stdout, p.stderr
        p = run([TOP, "--input", "-"], input=record_text("-1"))
        assert p.returncode == 0, p.stderr


@test
def report_and_top_survive_malformed_lines():
    """Nesting deeper than the JSON reader goes, a type that is no
    string: skipped and counted as bad lines, as a line cut short is."""
    deep = "[" * 100000 + "\n"
    text = (record_text("1") + deep + '{"type":["summary"],"ts_ns":1}\n'
            + '{"type":"warning","message":' + "[" * 900 + "]" * 900
            + "}\n")
    tl, st, doc = view_in_process(text)
    # the message 900 deep is read, or as deep as Python may go: skipped
    assert tl.bad_lines in (2, 3), tl.bad_lines
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        rec = os.path.join(d, "deep.jsonl")
        with open(rec, "w") as f:
            f.write(text)
        p = run([REPORT, rec, "-o", rec + ".html"])
        assert p.returncode == 0, p.stderr
        p = run([TOP, "--input", rec])
        assert p.returncode == 0, p.stderr


# ------------------------------------------------------------ the terminal

def top_in_terminal(tm, rec, d, tag, wrap=False):
    """ramcache-top --input @rec drawn in tmux (through `script` when
    @wrap), its stderr in a file; the shells around it ignore SIGHUP so
    that they live to write ramcache-top's exit status. (pid, err, rc)."""
    err = os.path.join(d, tag + ".err")
    rc = os.path.join(d, tag + ".rc")
    cmd = f"trap '' HUP; {sys.executable} {TOP} --input {rec} 2>{err}; " \
        f"echo $? >{rc}"
    script = os.path.join(d, tag + ".sh")
    with open(script, "w") as f:
        f.write(f"script -qfc {shlex.quote(cmd)} /dev/null\n" if wrap
                else cmd + "\n")
    tm.keys(f"sh {script}", "Enter")
    s = tm.wait_screen(lambda s: "OOM kills:" in s, 20)
    assert "OOM kills:" in s and tm.fmt("#{alternate_on}") == "1", s
    pids = subprocess.run(["pgrep", "-f", f"{TOP} --input {rec}"],
                          capture_output=True, text=True).stdout.split()
    with_python = [int(p) for p in pids if open(
        f"/proc/{p}/cmdline", "rb").read().startswith(
            sys.executable.encode() + b"\0")]
    assert len(with_python) == 1, pids
    return with_python[0], err, rc


def gone_quietly(pid, err, rc, timeout=10):
    end = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), "ramcache-top still runs"
    while not os.path.exists(rc) and time.monotonic() < end:
        time.sleep(0.05)
    with open(err) as f:
        said = f.read()
    assert "Traceback" not in said and "error" not in said, said
    with open(rc) as f:
        code = f.read().strip()
    assert code == "0", (code, said)


@test
def top_exits_quietly_when_its_terminal_goes_away():
    """The tmux session ramcache-top draws in is killed; then the
    `script` process giving it its terminal gets SIGKILL: each time it
    exits at once with status 0 and nothing on stderr (it ended with
    `_curses.error: nocbreak() returned ERR`)."""
    d = tempfile.mkdtemp(prefix="ramcache-test-top-")
    try:
        os.chmod(d, 0o755)
        rec = os.path.join(d, "rec.jsonl")
        with open(rec, "w") as f:
            f.write("".join(line(typ, fl) for typ, fl in template()[:-1]))
        tm = Tmux("gone")
        try:
            pid, err, rc = top_in_terminal(tm, rec, d, "killed")
        finally:
            tm.close()
        gone_quietly(pid, err, rc)
        with Tmux("gone2") as tm:
            pid, err, rc = top_in_terminal(tm, rec, d, "script", wrap=True)
            script = int(subprocess.run(
                ["pgrep", "-x", "script", "-P", str(tm.child())],
                capture_output=True, text=True).stdout.split()[0])
            os.kill(script, signal.SIGKILL)
            gone_quietly(pid, err, rc)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------ shared folders

@test
def a_hang_up_while_top_stops_listening_is_not_an_error():
    """The terminal's SIGHUP can come while ramcache-top sets its signals
    to be ignored on the way out (CI saw a Stop traceback from there): a
    handler firing inside that (simulated here on each signal's first
    change) leaves all three ignored and nothing raised."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("ramcache_top", TOP)
    spec = importlib.util.spec_from_loader("ramcache_top", loader)
    top = importlib.util.module_from_spec(spec)
    loader.exec_module(top)
    set_to, fired = {}, set()

    class Signals:  # the signal module, with a handler firing mid-change
        def __getattr__(self, name):
            return getattr(signal, name)

        def signal(self, s, h):
            if s not in fired:
                fired.add(s)
                raise top.Stop(s) if s != signal.SIGINT else KeyboardInterrupt
            set_to[s] = h

    top.signal = Signals()
    top.ignore_signals()
    assert fired == {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}, fired
    assert set_to == dict.fromkeys(fired, signal.SIG_IGN), set_to


def shared_folder():
    """A folder as /tmp is: world-writable, sticky."""
    d = tempfile.mkdtemp(prefix="ramcache-test-shared-")
    os.chmod(d, 0o1777)
    return d


def plant(link, target):
    """A link of another user's (uid 65534) at @link."""
    os.symlink(target, link)
    os.lchown(link, NOBODY, NOBODY)


@test
def report_never_follows_a_planted_link():
    """-o in a shared folder: links planted by another user at
    `<output>.tmp` (the name the report wrote its temporary file to) and at
    the output itself are not followed; their targets are unchanged, the
    report is a regular file of its own."""
    require_root()
    d = shared_folder()
    try:
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        rec = os.path.join(d, "rec.jsonl")
        with open(rec, "w") as f:
            f.write(record_text("1"))
        out = os.path.join(d, "report.html")
        plant(out + ".tmp", victim)
        p = run([REPORT, rec, "-o", out])
        assert p.returncode == 0, p.stderr
        assert open(victim).read() == "precious\n", "the .tmp link followed"
        assert os.path.islink(out + ".tmp")
        st = os.lstat(out)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, st
        assert stat.S_IMODE(st.st_mode) & 0o044 == 0o044, oct(st.st_mode)
        os.unlink(out)
        plant(out, victim)
        p = run([REPORT, rec, "-o", out])
        assert p.returncode == 0, p.stderr
        assert open(victim).read() == "precious\n", "the output followed"
        assert stat.S_ISREG(os.lstat(out).st_mode)
        left = [n for n in os.listdir(d) if n not in (
            "victim", "rec.jsonl", "report.html", "report.html.tmp")]
        assert not left, left
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def top_record_never_follows_a_planted_link():
    """ramcache-top --record in a shared folder: a link planted there, or
    a file of another user's, is refused with one line (exit 1); a file
    of its own is written over."""
    require_root()
    d = shared_folder()
    try:
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        rec = os.path.join(d, "rec.jsonl")
        with open(rec, "w") as f:
            f.write(record_text("1"))
        kept = os.path.join(d, "kept.jsonl")
        plant(kept, victim)
        p = run([TOP, "--input", rec, "--record", kept])
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (p.returncode, lines)
        assert lines[0].startswith("ramcache-top: "), lines
        assert open(victim).read() == "precious\n", "--record followed"
        os.unlink(kept)
        with open(kept, "w") as f:
            f.write("theirs\n")
        os.chown(kept, NOBODY, NOBODY)
        p = run([TOP, "--input", rec, "--record", kept])
        assert p.returncode == 1 and open(kept).read() == "theirs\n", \
            p.stderr
        os.unlink(kept)
        with open(kept, "w") as f:
            f.write("old\n" * 1000)
        p = run([TOP, "--input", rec, "--record", kept])
        assert p.returncode == 0, p.stderr
        with open(kept) as f:
            assert f.read() == record_text("1")
    finally:
        shutil.rmtree(d, ignore_errors=True)


main()
