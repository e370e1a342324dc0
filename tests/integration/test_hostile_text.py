#!/usr/bin/env python3
"""Text of outside origin on the operator's screen and in the report.

A process name, an entry label, a cgroup path or a whole record may be
written by someone hostile. Every program of the project that prints such
text (the agent, ramcache-top plain and curses, ramcache-report) goes
through one sanitiser rule, stated with its vectors in
tests/fixtures/sanitize.txt: the C one is tested against the file in
test_sanitize, the Python one here. Then each program is run on hostile
input and its output read back: a terminal in tmux (its title, which an
OSC 2 sequence would set), and the report's HTML parsed tag by tag.
"""
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from rctest import (AGENT, ROOT, MiB, Memcg, Tmux, import_package,  # noqa: E402
                    main, require_root, test)

import_package(os.path.join(ROOT, "report", "rcviz"))
from rcviz import sanitize  # noqa: E402

VECTORS = os.path.join(ROOT, "tests", "fixtures", "sanitize.txt")
REPORT = os.path.join(ROOT, "report", "ramcache-report")
TOP = os.path.join(ROOT, "report", "ramcache-top")

# What a terminal must never receive raw: ESC, BEL, CSI (8-bit, and as
# UTF-8), the bidi override; the OSC 2 sequence would retitle it.
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
TITLE = "\x1b]2;owned\x07"
# A comm is 15 bytes: the title sequence and a screen clear fit.
COMM = TITLE + "\x1b[2J"
HOSTILE = (TITLE + "\x1b[2J\u202e\x9b"
           '"><meta http-equiv="refresh" content="0;url=http://x.invalid/">'
           '<form action="http://x.invalid/"><button>go</button></form>'
           "<base href='http://x.invalid/'><script>alert(1)</script>")


def unescape(field):
    """The bytes a field of the vector file stands for."""
    out, i = bytearray(), 0
    while i < len(field):
        if field.startswith("\\x", i):
            out.append(int(field[i + 2:i + 4], 16))
            i += 4
        elif field.startswith("\\\\", i):
            out.append(0x5c)
            i += 2
        else:
            out += field[i].encode()
            i += 1
    return bytes(out)


def vectors():
    with open(VECTORS, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                src, want = line.split("\t")
                yield unescape(src), unescape(want)


@test
def python_sanitiser_gives_what_the_shared_vectors_say():
    n = 0
    for src, want in vectors():
        got = sanitize.of_bytes(src).encode("utf-8")
        assert got == want, (src, got, want)
        n += 1
    assert n >= 30, f"only {n} vectors"
    # and nothing it gives for any code point is raw on a terminal
    out = sanitize.text("".join(map(chr, range(0x110000))))
    bad = re.search("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                    "\ud800-\udfff]", out)
    assert not bad, hex(ord(bad.group()))


def crafted_record(text, number):
    """Every event type the report and ramcache-top read, every string
    field @text, every numeric field @number (a string too when crafted
    in full)."""
    ts = [10_000_000_000]

    def ev(typ, **kw):
        ts[0] += 100_000_000
        return dict(type=typ, ts_ns=ts[0], **kw)

    num = number
    return [
        ev("start", pid=4242, comm=text, memcg=text, cgroup_version=text,
           headroom=num, inactive=num, control=text),
        ev("target", state="attached", pid=4242, comm=text, cgroup=text,
           discovery=text, headroom=num, inactive=num),
        ev("summary", pid=4242, rss=num, memcg_usage=num, memcg_limit=num,
           mem_available=num, headroom=num, forecast=num, eta_s=num,
           drops=num, level="warn", reasons=[text, text],
           threshold_headroom=num, threshold_inactive=num),
        ev("pressure", pid=4242, level="high", reasons=[text], eta_s=num,
           headroom=num),
        ev("evict", pid=4242, seq=1, id=text, label=text, bytes=num,
           reason=text, headroom=num, forecast=num),
        ev("evict_done", pid=4242, seq=1, id=text, label=text,
           status=text, bytes=num, bytes_freed=num, ack_latency_ns=num,
           recv_latency_ns=num, freed_latency_ns=num),
        ev("evict_done", pid=4242, seq=2, label=text, status="evicted",
           ack_latency_ns=num),
        ev("reclaim", pid=4242, tid=4243, comm=text, kind=text,
           latency_ns=num, nr_reclaimed=num),
        ev("reclaim", pid=4242, tid=4243, comm=text, kind="direct",
           latency_ns=num),
        ev("kswapd", nid=0, state="wake"),
        ev("kswapd", nid=0, state="sleep"),
        ev("oom_kill", victim_pid=4343, comm=text, uid=num, anon_rss=num,
           file_rss=num, shmem_rss=num),
        ev("warning", message=text),
        ev("error", message=text, code=num),
        ev("target", state="exited", pid=4242, comm=text),
        ev("exit", reason=text, code=num),
    ]


class Tags(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text between them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def report_of(events, d, name):
    rec = os.path.join(d, name + ".jsonl")
    with open(rec, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    out = os.path.join(d, name + ".html")
    p = subprocess.run([sys.executable, REPORT, rec, "-o", out],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with open(out, encoding="utf-8") as f:
        return f.read()


@test
def report_escapes_every_field_of_a_crafted_record():
    """A record whose every string field (and, in a second record, every
    numeric one) holds markup: the page has only the report's own tags,
    the policy forbids forms and another base, the text is sanitised."""
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        for name, number in (("strings", 64 * MiB), ("all", HOSTILE)):
            doc = report_of(crafted_record(HOSTILE, number), d, name)
            p = Tags()
            p.feed(doc)
            names = {t for t, _ in p.tags}
            assert not names & {"form", "button", "base", "script",
                                "iframe", "img", "a"}, (name, names)
            metas = [a for t, a in p.tags if t == "meta"]
            assert len(metas) == 2, (name, metas)
            csp = [a["content"] for a in metas
                   if a.get("http-equiv") == "Content-Security-Policy"]
            assert csp and "form-action 'none'" in csp[0] and \
                "base-uri 'none'" in csp[0], csp
            for t, attrs in p.tags:
                for k, v in attrs.items():
                    assert "x.invalid" not in k, (t, k)
                    assert not k.startswith("on"), (t, k)
            assert not any(r in doc for r in RAW), name
            shown = "".join(p.text)
            assert "\\x1b]2;owned\\x07" in shown, name
            assert '"><meta http-equiv="refresh"' in shown, name


def hostile_record_file(d):
    """A record of an OOM kill of a process named COMM, a hostile label
    and warning, ending with the agent's exit."""
    events = crafted_record(COMM, 64 * MiB)
    path = os.path.join(d, "hostile.jsonl")
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    return path


def title_of(tm):
    return tm.fmt("#{pane_title}")


@test
def top_plain_and_curses_show_hostile_names_escaped():
    """ramcache-top on a record with an OOM victim named ESC ] 2 ; owned
    BEL: in plain mode (a pipe, and a terminal with --plain) and in curses
    mode the terminal's title stays, the name is shown escaped."""
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        rec = hostile_record_file(d)
        p = subprocess.run([sys.executable, TOP, "--input", rec],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert not any(r in p.stdout for r in RAW), p.stdout
        assert "OOM kill: pid 4343 (\\x1b]2;owned\\x07\\x1b[2J)" in \
            p.stdout, p.stdout
        with Tmux("hostile") as tm:
            before = title_of(tm)
            assert before != "owned"
            tm.keys(f"{sys.executable} {TOP} --plain --input {rec}; "
                    "echo plain-$((6*7))", "Enter")
            s = tm.wait_screen(lambda s: "plain-42" in s, 20)
            assert "plain-42" in s, s
            assert title_of(tm) == before, (title_of(tm), s)
            assert "(\\x1b]2;owned\\x07\\x1b[2J)" in s, s
            tm.keys("clear", "Enter")
            tm.keys(f"{sys.executable} {TOP} --input {rec}", "Enter")
            s = tm.wait_screen(lambda s: "agent exited" in s, 20)
            assert "agent exited" in s, s
            assert title_of(tm) == before, (title_of(tm), s)
            assert "(\\x1b]2;owned\\x07\\x1b[2J)" in s, s
            assert "\u202e" not in s, s
            tm.keys("q")


HOG = """
import ctypes, mmap, os, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
os.write(1, b"go\\n")
keep = []
while True:
    m = mmap.mmap(-1, 16 << 20)
    for off in range(0, 16 << 20, 4096):
        m[off] = 1
    keep.append(m)
"""


@test
def agent_text_mode_shows_an_oom_victims_hostile_name_escaped():
    """A real OOM kill, in a scratch memory cgroup, of a process that
    named itself ESC ] 2 ; owned BEL ESC [ 2 J: the agent in text mode on a
    terminal (tmux) prints the kill with the name escaped, the title stays,
    and its --json record of the same kill is shown escaped by ramcache-top
    and the report."""
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise RuntimeError(f"{AGENT} is not built")
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d, \
            Memcg(64 * MiB) as cg, Tmux("oomname") as tm:
        before = title_of(tm)
        rec = os.path.join(d, "oom.jsonl")
        text_out = os.path.join(d, "text.out")
        sleeper = subprocess.Popen(["sleep", "60"],
                                   preexec_fn=cg.preexec())
        json_agent = subprocess.Popen(
            [AGENT, "--json", "--no-evict", "--pid", str(sleeper.pid),
             "--interval", "1s"], stdout=open(rec, "w"),
            stderr=subprocess.DEVNULL)
        try:
            tm.keys(f"{AGENT} --no-evict --pid {sleeper.pid} --interval 1s"
                    f" 2>&1 | tee {text_out}", "Enter")
            # both attached (loading the BPF programs takes a moment)
            end = time.monotonic() + 30
            while time.monotonic() < end and not (
                    '"start"' in open(rec).read()
                    and "headroom" in tm.screen()):
                time.sleep(0.1)
            hog = subprocess.Popen([sys.executable, "-c", HOG, COMM],
                                   stdout=subprocess.PIPE,
                                   preexec_fn=cg.preexec())
            assert hog.stdout.readline() == b"go\n"
            hog.wait(60)
            end = time.monotonic() + 15
            while time.monotonic() < end and "OOM" not in tm.screen():
                time.sleep(0.2)
            time.sleep(1.5)
            s = tm.screen()
            assert cg.oom_kills() >= 1, "no OOM kill"
            assert "\\x1b]2;owned\\x07\\x1b[2J" in s, s
            assert title_of(tm) == before, title_of(tm)
        finally:
            tm.keys("C-c")
            json_agent.send_signal(2)
            json_agent.wait(10)
            sleeper.kill()
            sleeper.wait()
        with open(text_out, "rb") as f:
            raw = f.read()
        assert b"\x1b" not in raw and b"\x07" not in raw, raw[-500:]
        with open(rec) as f:
            kills = [json.loads(x) for x in f if '"oom_kill"' in x]
        mine = [k for k in kills if k.get("comm") == COMM]
        assert mine, kills
        p = subprocess.run([sys.executable, TOP, "--input", rec],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert not any(r in p.stdout for r in RAW), p.stdout
        assert f"pid {mine[0]['victim_pid']} (\\x1b]2;owned\\x07" in \
            p.stdout, p.stdout
        p = subprocess.run([sys.executable, REPORT, rec, "-o", "-"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert not any(r in p.stdout for r in RAW)
        assert "\\x1b]2;owned\\x07" in p.stdout


main()
