#!/usr/bin/env python3
"""docs/control-page.md is the truth: its tables against the C header.

Parses the document's struct tables (offset, size, type, field), its value
table, the JSON spellings, the size formula and the refusal messages; then
compiles a small C program against include/ramcache/control.h and
user/page/control_parse.c that prints offsetof/sizeof, every value, every
control_why_str() and ramcache_ctl_size(), and compares. Names in the header
that the document leaves out are mismatches too. Two cases change an
offset, one in a copy of the document and one in a copy of the header, and
show the comparison catches each.
"""
import os
import re
import shutil
import subprocess
import tempfile

from rctest import ROOT, main, test  # noqa: E402

DOC = os.path.join(ROOT, "docs", "control-page.md")
INCLUDE = os.path.join(ROOT, "include")
CC = os.environ.get("CC", "cc")

STRUCT_HEAD = re.compile(r"^###.*`struct (\w+)` \((\d+) bytes\)")
FIELD_ROW = re.compile(
    r"^\| (\d+) \| (\d+) \| (u8|u32|u64|char)(\[\d+\])? \| `(\w+)` \| ([EA]) \|")
VALUE_ROW = re.compile(r"^\| `(RAMCACHE_\w+)` \| (`[^`]*`|\d+) \|")
JSON_ROW = re.compile(r"^\| `(RAMCACHE_(?:REASON|ACK)_\w+)` \| `(\w+)` \|$")
WHY_ROW = re.compile(r"^\| `(CTL_ERR_\w+)` \| ([^|]+?) \| ")
FORMULA = re.compile(r"^    (\w+)\s*= (.+)$")
TYPE_SIZE = {"u8": 1, "u32": 4, "u64": 8, "char": 1}


def read(path):
    with open(path) as f:
        return f.read()


def parse_doc(text):
    """Everything the document states, as plain Python values."""
    doc = {"structs": {}, "values": {}, "json": {}, "why": {},
           "formula": []}
    cur = None
    in_formula = False
    for line in text.splitlines():
        m = STRUCT_HEAD.match(line)
        if m:
            cur = doc["structs"].setdefault(
                m.group(1), {"size": int(m.group(2)), "fields": {}})
            continue
        if line.startswith("#"):
            cur = None
            in_formula = line.strip() == "### Size formula"
            continue
        m = FIELD_ROW.match(line)
        if m and cur is not None:
            off, size, typ, dim, name = (int(m.group(1)), int(m.group(2)),
                                         m.group(3), m.group(4), m.group(5))
            n = int(dim[1:-1]) if dim else 1
            cur["fields"][name] = (off, size, TYPE_SIZE[typ] * n)
            continue
        m = JSON_ROW.match(line)
        if m:
            doc["json"][m.group(1)] = m.group(2)
            continue
        m = VALUE_ROW.match(line)
        if m:
            v = m.group(2)
            if v.startswith('`"'):
                doc["values"][m.group(1)] = v[2:-2]
            else:
                doc["values"][m.group(1)] = int(v.strip("`"), 0)
            continue
        m = WHY_ROW.match(line)
        if m:
            doc["why"][m.group(1)] = m.group(2).strip()
            continue
        m = FORMULA.match(line)
        if m and in_formula:
            doc["formula"].append((m.group(1), m.group(2)))
    return doc


def header_names(include):
    """Structs and their fields, and RAMCACHE_* names, from the header."""
    text = read(os.path.join(include, "ramcache", "control.h"))
    structs = {}
    for name, body in re.findall(r"struct (\w+) \{(.*?)\n\};", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        structs[name] = re.findall(
            r"^\s*(?:uint\d+_t|char)\s+(\w+)(?:\[[^\]]+\])?;", body, re.M)
    names = set(re.findall(r"^#define (RAMCACHE_\w+)\s", text, re.M))
    names |= set(re.findall(r"^\s*(RAMCACHE_\w+)\s*=", text, re.M))
    names.discard("RAMCACHE_CONTROL_H")
    whys = re.findall(r"^\s*(CTL_ERR_\w+),",
                      read(os.path.join(ROOT, "user", "page", "control.h")), re.M)
    whys = [w for w in whys if w not in ("CTL_ERR_SYS", "CTL_ERR_MAX")]
    return structs, names, whys


SAMPLES = [(1, 1), (4096, 64), (65536, 4096), (7, 8)]


def c_probe(doc, include):
    """What the compiler says about every name the document uses."""
    lines = ['#include <stddef.h>', '#include <stdio.h>',
             '#include "ramcache/control.h"', '#include "page/control.h"',
             'int main(void) {']
    for s, st in doc["structs"].items():
        lines.append(f'printf("S {s} %zu\\n", sizeof(struct {s}));')
        for f in st["fields"]:
            lines.append(f'printf("F {s}.{f} %zu %zu\\n", '
                         f'offsetof(struct {s}, {f}), '
                         f'sizeof(((struct {s} *)0)->{f}));')
    for n, v in doc["values"].items():
        if isinstance(v, str):
            lines.append(f'printf("V {n} %s\\n", {n});')
        else:
            lines.append(f'printf("V {n} %llu\\n", '
                         f'(unsigned long long)({n}));')
    for n in doc["json"]:
        fn = "ramcache_status_name" if "_ACK_" in n else "ramcache_reason_name"
        lines.append(f'printf("J {n} %s\\n", {fn}({n}));')
    for n in doc["why"]:
        lines.append(f'printf("W {n} %s\\n", control_why_str({n}));')
    for e, r in SAMPLES:
        lines.append(f'printf("Z {e} {r} %llu\\n", (unsigned long long)'
                     f'ramcache_ctl_size({e}, {r}));')
    lines += ["return 0;", "}"]
    d = tempfile.mkdtemp(prefix="ramcache-test-docabi-")
    try:
        src = os.path.join(d, "probe.c")
        exe = os.path.join(d, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run(
            [CC, "-std=gnu11", "-D_GNU_SOURCE", f"-I{include}",
             f"-I{os.path.join(ROOT, 'user')}", src,
             os.path.join(ROOT, "user", "page", "control_parse.c"), "-o", exe],
            capture_output=True, text=True)
        assert p.returncode == 0, f"probe does not compile:\n{p.stderr}"
        out = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    got = {}
    for line in out.splitlines():
        kind, key, rest = line.split(" ", 2)
        got[(kind, key)] = rest
    return got


def compare(doc_text, include=INCLUDE):
    """Every difference between the document and the code, as sentences."""
    doc = parse_doc(doc_text)
    got = c_probe(doc, include)
    bad = []
    structs, names, whys = header_names(include)
    for s, fields in structs.items():
        if s not in doc["structs"]:
            bad.append(f"struct {s} has no table")
            continue
        for f in fields:
            if f not in doc["structs"][s]["fields"]:
                bad.append(f"{s}.{f} is not in the table")
    for n in sorted(names - set(doc["values"])):
        bad.append(f"{n} is not in the value table")
    for w in whys:
        if w not in doc["why"]:
            bad.append(f"{w} is not in the refusal tables")
    for s, st in doc["structs"].items():
        size = int(got[("S", s)])
        if size != st["size"]:
            bad.append(f"struct {s}: document {st['size']} bytes, C {size}")
        end = 0
        for f, (off, fsize, tsize) in sorted(st["fields"].items(),
                                              key=lambda kv: kv[1][0]):
            coff, csize = map(int, got[("F", f"{s}.{f}")].split())
            if (off, fsize) != (coff, csize):
                bad.append(f"{s}.{f}: document offset {off} size {fsize}, "
                           f"C offset {coff} size {csize}")
            if fsize != tsize:
                bad.append(f"{s}.{f}: size {fsize} is not its type's {tsize}")
            if off != end:
                bad.append(f"{s}.{f}: document leaves bytes {end}..{off}")
            end = off + fsize
        if end != st["size"]:
            bad.append(f"struct {s}: fields end at {end}, not {st['size']}")
    for n, v in doc["values"].items():
        c = got[("V", n)]
        if (c if isinstance(v, str) else int(c)) != v:
            bad.append(f"{n}: document {v!r}, C {c}")
    for n, v in doc["json"].items():
        if got[("J", n)] != v:
            bad.append(f"{n}: document JSON {v}, C {got[('J', n)]}")
    for n, v in doc["why"].items():
        if got[("W", n)] != v:
            bad.append(f"{n}: document says {v!r}, agent prints "
                       f"{got[('W', n)]!r}")
    if not doc["formula"]:
        bad.append("no size formula")
    for e, r in SAMPLES:
        env = {"max_entries": e, "ring_size": r}
        for name, expr in doc["formula"]:
            env[name] = eval(expr, {"__builtins__": {}}, dict(env))
        c = int(got[("Z", f"{e}")].split()[1])
        if env.get("total_size") != c:
            bad.append(f"size formula for {e} entries, ring {r}: document "
                       f"{env.get('total_size')}, C {c}")
    return bad


@test
def document_matches_the_header():
    doc = parse_doc(read(DOC))
    # the parser must have found what there is to find
    assert set(doc["structs"]) == {"ramcache_ctl", "ramcache_ctl_entry",
                                   "ramcache_ctl_cmd", "ramcache_ctl_ack"}
    n = len(doc["structs"]["ramcache_ctl"]["fields"])
    assert n == 35, n  # expect_bytes, expect_ns, expect_seen_ns since 32
    assert len(doc["values"]) >= 26 and len(doc["why"]) >= 20
    assert len(doc["formula"]) == 4
    bad = compare(read(DOC))
    assert not bad, "\n".join(bad)


OUT_C = os.path.join(ROOT, "user", "emit", "out.c")
README = os.path.join(ROOT, "README.md")
# helpers of out.c that write fields of their own, and those fields
HELPER_FIELDS = {"tag_json": {"comm", "cgroup", "domain"}, "reasons_json": {"reasons"},
                 "hdr_json": {"pid", "tid", "cpu"}}
EVERY_EVENT = {"type", "ts_ns"}  # README says so once, for every event
TYPE_CALL = re.compile(r'(?:json_event(?:_at)?\(o, &w|event_begin\(&w, o->f|'
                       r'hdr_json\(&w, o->f|message\(o)\s*,\s*"(\w+)"')


def emitted(src):
    """{event type: fields} the agent's JSON writer (out.c) can print, read
    from its code: each function's types and the fields written after each
    (a helper's fields with it; a function of several types split at each)."""
    out = {}
    for body in re.split(r"\n}\n", src):
        marks = [(m.start(), m.group(1)) for m in TYPE_CALL.finditer(body)]
        for i, (at, typ) in enumerate(marks):
            part = body[at:marks[i + 1][0] if i + 1 < len(marks) else len(body)]
            f = out.setdefault(typ, set())
            f.update(re.findall(r'json_\w+\(&?w, "(\w+)"', part))
            for helper, names in HELPER_FIELDS.items():
                if helper + "(" in part:
                    f.update(names)
            m = re.match(r'message\(o, "\w+", (-?\w+)', part)
            if m:  # message() writes the line, and the code unless it is -1
                f.update({"message"} | ({"code"} if m.group(1) != "-1" else set()))
    return out


def documented(readme):
    """{event type: the text of its row} of README's Output table."""
    rows = {}
    for line in readme.splitlines():
        m = re.match(r"\| `(\w+)` \| (.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def undocumented(src, readme):
    rows = documented(readme)
    bad = []
    for typ, fields in sorted(emitted(src).items()):
        row = rows.get(typ)
        if row is None:
            bad.append(f"event {typ}: no row in README's Output table")
            continue
        bad += [f"event {typ}: field {f} is not in its row" for f in sorted(fields - EVERY_EVENT)
                if f"`{f}`" not in row]
    return bad


@test
def every_field_the_agent_prints_is_in_readme():
    """Each field of each event the agent's JSON writer can print is named
    in that event's row of README's Output table."""
    src, readme = read(OUT_C), read(README)
    types = emitted(src)
    assert {"start", "control", "evict", "evict_done", "cannot_free", "rss"} <= set(types), types
    bad = undocumented(src, readme)
    assert not bad, "\n".join(bad)
    # the check can fail: a field printed and not documented is caught
    assert undocumented(src.replace('"inflight"', '"in_flight_now"'), readme)


RULE_HEAD = "### Every field"
RULE_ROW = re.compile(r"^\| ([^|]+?) \| ([^|]+?) \| (publishing|plain|guarded) \|")
RECORDS = {"ack": "ramcache_ctl_ack", "command": "ramcache_ctl_cmd"}


def store_rules(text):
    """The fields the "Every field" table gives a store rule, by struct:
    `a` .. `b` names every field from a to b by offset; a row that starts
    with "ack" or "command" is about that record, any other about the
    header ("every entry field": the whole entry)."""
    doc = parse_doc(text)
    covered = {s: set() for s in doc["structs"]}
    rows = text.split(RULE_HEAD, 1)[1].split("\n#", 1)[0].splitlines()
    for line in rows:
        m = RULE_ROW.match(line)
        if not m:
            continue
        cell = m.group(1)
        first = cell.split()[0]
        s = RECORDS.get(first, "ramcache_ctl")
        fields = doc["structs"][s]["fields"]
        if "every entry field" in cell:
            covered["ramcache_ctl_entry"] |= set(
                doc["structs"]["ramcache_ctl_entry"]["fields"])
        for a, b in re.findall(r"`(\w+)` \.\. `(\w+)`", cell):
            lo, hi = fields[a][0], fields[b][0]
            covered[s] |= {f for f, v in fields.items() if lo <= v[0] <= hi}
        covered[s] |= {f for f in re.findall(r"`(\w+)`", cell) if f in fields}
    return doc, covered


def missing_rules(text):
    """Fields (not reserved or pad) without a store rule."""
    doc, covered = store_rules(text)
    return [f"{s}.{f}" for s, st in doc["structs"].items() for f in st["fields"]
            if not f.startswith(("reserved", "pad")) and f not in covered[s]]


@test
def every_field_has_a_store_rule():
    """Each field of the four records is in the "Every field" table: who
    writes it, with which kind of store, when."""
    text = read(DOC)
    assert RULE_HEAD in text
    doc, covered = store_rules(text)
    assert len(covered["ramcache_ctl"]) >= 25, covered
    bad = missing_rules(text)
    assert not bad, f"fields without a store rule: {bad}"
    # a field left out is caught
    row = next(line for line in text.splitlines()
               if line.startswith("| `generation` |"))
    assert missing_rules(text.replace(row + "\n", "")) == \
        ["ramcache_ctl.generation"]


@test
def offset_changed_in_the_document_is_caught():
    """The table as it was before: entries_off at 64, the header at 56."""
    text = read(DOC)
    old = "| 56 | 8 | u64 | `entries_off` |"
    assert old in text
    bad = compare(text.replace(old, "| 64 | 8 | u64 | `entries_off` |"))
    assert any("entries_off: document offset 64" in b for b in bad), bad


@test
def offset_changed_in_the_header_is_caught():
    """One more reserved word in the header moves every later field."""
    d = tempfile.mkdtemp(prefix="ramcache-test-docabi-inc-")
    try:
        shutil.copytree(INCLUDE, os.path.join(d, "include"))
        h = os.path.join(d, "include", "ramcache", "control.h")
        text = read(h)
        old = "\tuint32_t reserved0;\n"
        assert old in text
        with open(h, "w") as f:
            f.write(text.replace(old, old + "\tuint32_t reserved0b[2];\n"))
        bad = compare(read(DOC), os.path.join(d, "include"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert any(b.startswith("ramcache_ctl.entries_off: document offset 56")
               for b in bad), bad


@test
def value_and_message_changes_are_caught():
    text = read(DOC)
    for old, new, needle in (
            ("| `RAMCACHE_F_MODEL` | 4 |", "| `RAMCACHE_F_MODEL` | 8 |",
             "RAMCACHE_F_MODEL"),
            ("| `CTL_ERR_OFFSETS` | section offsets do not match the sizes |",
             "| `CTL_ERR_OFFSETS` | section offsets are not canonical |",
             "CTL_ERR_OFFSETS"),
            ("    acks_off    = cmds_off + 32 * ring_size",
             "    acks_off    = cmds_off + 48 * ring_size", "size formula"),
            ("| `RAMCACHE_ACK_BUSY` | `busy` |",
             "| `RAMCACHE_ACK_BUSY` | `in_use` |", "RAMCACHE_ACK_BUSY"),
            ("| `RAMCACHE_REASON_RECLAIM` | 4 |", "| `RAMCACHE_REASON_RECL"
             "AIM` | 4 (gone) |", "RAMCACHE_REASON_RECLAIM is not in")):
        assert old in text, old
        bad = compare(text.replace(old, new))
        assert any(needle in b for b in bad), (needle, bad)


main()
