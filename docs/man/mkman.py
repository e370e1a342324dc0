#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Manual pages from one source each (`make man`): what a program's --help
says, or what a C header's comments say, turned into roff; plus the few
sections neither holds (FILES, SEE ALSO, ...) from a markdown page of its
own, appended after them.

    mkman.py PAGE.md --help-of [INTERPRETER] PROGRAM [--version V]
    mkman.py PAGE.md --header HEADER [--version V]

PAGE.md starts with "% name(section) | what it is" (the NAME line); the
rest is a small markdown: "## " headings, paragraphs, "- " lists, code
blocks indented by four spaces, `code` and *emphasis*. The page goes to
stdout. SOURCE_DATE_EPOCH, when set, dates it (reproducible builds).
"""
import argparse
import os
import re
import subprocess
import sys
import time

OPTION = re.compile(r"^( {1,8})(-\S.*)$")
HEADING = re.compile(r"^([A-Za-z][\w ]{0,30}):$")
GAP = re.compile(r"\s{2,}")
SECTION_NAMES = {"1": "User Commands", "3": "Library Functions",
                 "8": "System Administration"}


# ------------------------------------------------------------------ roff

def esc(text):
    """@text for roff: backslashes kept, the dashes of options and numbers
    as minus signs (a hyphen inside a word stays one)."""
    text = text.replace("\\", "\\e")
    return re.sub(r"(?<![\w-])-+", lambda m: "\\-" * len(m.group(0)), text)


def line_safe(text):
    """A roff line that does not start a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def inline(text):
    """Markdown's `code` and *emphasis*, escaped."""
    out = []
    for part in re.split(r"(`[^`]+`)", text):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("\\fB" + esc(part[1:-1]) + "\\fR")
        else:
            part = esc(part)
            part = re.sub(r"\*([^*\s][^*]*)\*", r"\\fI\1\\fR", part)
            out.append(re.sub(r"\b([\w.-]+)\((\d)\)", r"\\fB\1\\fR(\2)",
                              part))
    return "".join(out)


def code_block(lines):
    body = [line_safe(esc(ln)) for ln in lines]
    return [".PP", ".RS 4", ".nf", *body, ".fi", ".RE"]


def option_term(term):
    """-p, --pid PID: the options bold, their arguments italic."""
    words = []
    for word in term.split():
        tail = "," if word.endswith(",") else ""
        word = word.rstrip(",")
        font = "B" if word.startswith("-") else "I"
        words.append(f"\\f{font}{esc(word)}\\fR{tail}")
    return " ".join(words)


def render(page):
    """The roff text of @page: {title, section, version, name_line,
    sections: [(title, [item])]}, an item ("p", text), ("code", lines),
    ("opt", term, text), ("sub", title), ("li", text) or ("raw", roff
    lines)."""
    stamp = float(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%B %Y", time.gmtime(stamp))
    sec = page["section"]
    out = [f'.TH {page["title"].upper()} {sec} "{date}" '
           f'"{page["version"]}" "{SECTION_NAMES.get(sec, "")}"',
           ".SH NAME", f'{esc(page["title"])} \\- {esc(page["name_line"])}']
    for title, items in page["sections"]:
        if not items:
            continue
        out.append(f".SH {title}")
        for item in items:
            kind = item[0]
            if kind == "p":
                out += [".PP", line_safe(inline(item[1]))]
            elif kind == "code":
                out += code_block(item[1])
            elif kind == "opt":
                out += [".TP", option_term(item[1])]
                if item[2]:
                    out.append(line_safe(inline(item[2])))
            elif kind == "sub":
                out.append(f".SS {esc(item[1])}")
            elif kind == "li":
                out += [".IP \\(bu 2", line_safe(inline(item[1]))]
            elif kind == "raw":
                out += item[1]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ --help

def split_option(body):
    """(term, description) of an option line: they are two spaces apart,
    or one where the term is long; then the term is the options, each with
    at most one argument (a word without small letters, as PID|PATTERN=W)."""
    parts = GAP.split(body.strip(), maxsplit=1)
    if len(parts) == 2:
        return parts[0], parts[1]
    words = body.split()
    n = 0
    while n < len(words) and (words[n].startswith("-") or (
            n and words[n - 1].startswith("-")
            and not re.search(r"[a-z]", words[n]))):
        n += 1
    return " ".join(words[:n]), " ".join(words[n:])


def usage(lines):
    """The synopsis: the usage line and those that continue it."""
    first = next(i for i, ln in enumerate(lines)
                 if ln.lower().startswith("usage:"))
    end = first + 1
    while end < len(lines) and lines[end].startswith(" ") and lines[end].strip():
        end += 1
    text = " ".join(ln.strip() for ln in lines[first:end])
    return text.split(":", 1)[1].strip(), lines[:first] + lines[end:]


class HelpParser:
    """--help text, line by line, into the sections of a page: the
    description (with any text after the options), the options in their
    groups, the examples and the exit status."""

    def __init__(self):
        self.sections = {"DESCRIPTION": [], "OPTIONS": [], "EXAMPLES": [],
                         "EXIT STATUS": []}
        self.where = "DESCRIPTION"  # where text goes
        self.in_options = False  # in a group of options (or arguments)
        self.item = None  # the paragraph, code or option being read

    def add(self, item):
        self.sections["OPTIONS" if item[0] == "opt" else self.where].append(
            item)
        self.item = item

    def heading(self, name, following):
        """Whether @name (a line "Name:") heads options or examples."""
        if "example" in name.lower():
            self.where, self.in_options = "EXAMPLES", False
        elif OPTION.match(following) or name.lower().endswith(
                ("arguments", "options")):
            self.where, self.in_options = "DESCRIPTION", True
            self.sections["OPTIONS"].append(("sub", name[0].upper() + name[1:]))
        else:
            return False
        self.item = None
        return True

    def text(self, line):
        item = self.item
        if line.lower().startswith("exit status:"):
            self.where = "EXIT STATUS"
            self.add(["p", line.split(":", 1)[1].strip()])
        elif line.startswith(" "):
            if item and item[0] == "code":
                item[1].append(line.strip())
            else:
                self.add(["code", [line.strip()]])
        elif item and item[0] == "p":
            item[1] += " " + line.strip()
        else:
            if self.where == "EXAMPLES":
                self.where = "DESCRIPTION"
            self.add(["p", line.strip()])

    def feed(self, lines):
        for i, line in enumerate(lines):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            indent = len(line) - len(line.lstrip())
            head = HEADING.match(line)
            if not line.strip():
                self.item = None
            elif head and self.heading(head.group(1), nxt):
                continue
            elif self.item and self.item[0] == "opt" and indent > 8:
                self.item[2] = (self.item[2] + " " + line.strip()).strip()
            elif self.in_options and 0 < indent <= 8:
                self.add(["opt", *split_option(line)])
            else:
                self.in_options = self.in_options and indent > 0
                self.text(line)
        return self.sections


def help_page(argv):
    """The sections a program's --help gives, and its usage line."""
    r = subprocess.run([*argv, "--help"], capture_output=True, text=True,
                       env=dict(os.environ, LC_ALL="C.UTF-8", COLUMNS="80"),
                       timeout=60)
    if r.returncode != 0 or not r.stdout.strip():
        sys.exit(f"mkman: failed to run {' '.join(argv)} --help: exit "
                 f"{r.returncode}: {r.stderr.strip()[-300:]}")
    synopsis, rest = usage(r.stdout.splitlines())
    sections = HelpParser().feed(rest)
    name, _, args = synopsis.partition(" ")
    syn = [".B " + esc(name)]
    if args:
        syn.append(line_safe(esc(args)))
    return syn, sections


# ------------------------------------------------------------------ header

def comment_text(comment):
    """The words of a /* */ comment, its paragraphs split by blank lines;
    @name becomes *name*."""
    body = re.sub(r"^/\*+|\*+/$", "", comment.strip())
    lines = [re.sub(r"^\s*\* ?", "", ln).rstrip() for ln in body.split("\n")]
    paras = [" ".join(p.split()) for p in "\n".join(lines).split("\n\n")]
    return [re.sub(r"@(\w+)", r"*\1*", p) for p in paras if p]


def header_chunks(text):
    """(comment, declaration, blank line before it) pieces of a header at
    file scope, with the preprocessor and the C++ guard left out."""
    kept, skip = [], False
    for ln in text.splitlines():
        if ln.startswith("#ifdef __cplusplus"):
            skip = True
        elif skip and ln.startswith("#endif"):
            skip = False
        elif not skip and not ln.startswith("#"):
            kept.append(ln)
    text = "\n".join(kept)
    pos, out = 0, []
    for m in re.finditer(r"/\*.*?\*/|[^;/{}]*(\{[^{}]*\})?[^;/{}]*;", text,
                         re.S):
        piece = m.group(0).strip()
        lead = m.group(0)[:m.group(0).index(piece[0])]
        blank = "\n\n" in text[pos:m.start()] + lead
        out.append(("comment" if piece.startswith("/*") else "decl",
                    piece, blank))
        pos = m.end()
    return out


def header_groups(text):
    """The header's description (its first comment after the licence) and
    its declarations, each group with the comment above it."""
    description, groups, last = None, [], None
    for kind, piece, blank in header_chunks(text):
        if kind == "comment":
            if "SPDX-License-Identifier" in piece:
                continue
            if description is None:
                description = comment_text(piece)
            else:
                last = {"doc": comment_text(piece), "decls": []}
                groups.append(last)
        elif last is not None and (not blank or not last["decls"]):
            last["decls"].append(piece)
        else:
            last = {"doc": [], "decls": [piece]}
            groups.append(last)
    return description or [], [g for g in groups if g["decls"]]


def prototype(decl, width=64):
    """A prototype on one line, or broken after its commas into lines of
    at most @width, the arguments under the first one."""
    text = " ".join(decl.split())
    if len(text) <= width or "(" not in text:
        return [text]
    head, _, args = text.partition("(")
    lines, pad = [head + "("], " " * (len(head) + 1)
    for arg in args.split(", "):
        sep = "" if lines[-1].endswith("(") else " "
        if len(lines[-1]) + len(sep) + len(arg) + 1 > width and sep:
            lines.append(pad + arg)
        else:
            lines[-1] += sep + arg
        if not arg.endswith(";"):
            lines[-1] += ","
    return lines


def is_type(decl):
    """A struct, enum or union (or its forward declaration), not a
    function returning one."""
    return bool(re.match(r"(struct|enum|union|typedef)\b", decl)) and \
        "(" not in decl.split("{")[0]


def header_page(path, title):
    """The sections of a library's page from its header."""
    with open(path) as f:
        description, groups = header_groups(f.read())
    if description and description[0].startswith(title + ":"):
        description = description[1:]
    funcs = [g for g in groups if not is_type(g["decls"][0])]
    types = [g for g in groups if is_type(g["decls"][0])]
    inc = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
    syn = [".nf", f"\\fB#include <{esc(inc)}>\\fR", ""]
    syn += [line_safe(esc(ln)) for g in funcs for d in g["decls"]
            for ln in prototype(d)]
    syn += ["", f"Link with \\fI\\-l{esc(title[3:])}\\fR (or "
            f"\\fBpkg\\-config \\-\\-cflags \\-\\-libs {esc(title)}\\fR).",
            ".fi"]
    sections = {"DESCRIPTION": [("p", p) for p in description],
                "FUNCTIONS": [], "TYPES": []}
    for where, chosen in (("FUNCTIONS", funcs), ("TYPES", types)):
        for g in chosen:
            sections[where].append(("code", [ln for d in g["decls"]
                                             for ln in code_lines(d)]))
            sections[where] += [("p", p) for p in g["doc"]]
    return syn, sections


def code_lines(decl):
    """A declaration as it reads in the header, tabs as eight columns; a
    prototype on one line."""
    if "{" not in decl:
        return prototype(decl)
    return [ln.expandtabs(8).rstrip() for ln in decl.splitlines()]


# ------------------------------------------------------------------ markdown

def markdown(text):
    """The sections of the small markdown PAGE.md holds."""
    sections, items, item, blank = [], None, None, False
    for line in text.splitlines():
        if line.startswith("## "):
            items, item = [], None
            sections.append((line[3:].strip().upper(), items))
        elif items is None:
            continue
        elif not line.strip():
            blank = True  # a code block goes on after a blank line
            continue
        elif line.startswith("    "):
            if not item or item[0] != "code":
                item = ["code", []]
                items.append(item)
            elif blank:
                item[1].append("")
            item[1].append(line[4:])
        elif line.startswith("- "):
            item = ["li", line[2:].strip()]
            items.append(item)
        elif item and item[0] in ("p", "li") and not blank:
            item[1] += " " + line.strip()
        else:
            item = ["p", line.strip()]
            items.append(item)
        blank = False
    return sections


def read_page(path):
    """(title, section, name line, markdown sections) of PAGE.md."""
    with open(path) as f:
        first, _, rest = f.read().partition("\n")
    m = re.match(r"^% ([\w.-]+)\((\d)\) \| (.+)$", first)
    if not m:
        sys.exit(f"mkman: failed to read {path}: its first line is not "
                 "'% name(section) | what it is'")
    return m.group(1), m.group(2), m.group(3), markdown(rest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", help="the page's own sections (markdown)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--help-of", nargs="+", metavar="ARGV",
                     help="the program (and its interpreter) whose --help "
                     "the page tells")
    src.add_argument("--header", help="the C header the page tells")
    ap.add_argument("--version", default="", help="the version in the footer")
    a = ap.parse_args()
    title, section, name_line, extra = read_page(a.page)
    if a.help_of:
        synopsis, sections = help_page(a.help_of)
    else:
        synopsis, sections = header_page(a.header, title)
    page = {"title": title, "section": section, "name_line": name_line,
            "version": f"ramcache-bpf {a.version}".strip(),
            "sections": [("SYNOPSIS", [("raw", synopsis)]),
                         *sections.items(), *extra]}
    sys.stdout.write(render(page))


if __name__ == "__main__":
    main()
