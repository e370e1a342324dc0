#!/usr/bin/env python3
"""The manual pages (`make man`, docs/man/mkman.py): every option a
program's --help lists is an option entry of its page (ramcache-bpf(8),
ramcache-report(1), ramcache-top(1)); every function ramcache.h declares is
in the synopsis of libramcache(3), and the page's example compiles and
links against the library; groff reads every page without a warning. A
page from which an option or a function was dropped fails the checks
(the check_* cases)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from rctest import AGENT, OUTPUT, ROOT, main, test  # noqa: E402

PAGES = {"ramcache-bpf.8": [AGENT],
         "ramcache-report.1": [sys.executable,
                               os.path.join(ROOT, "report", "ramcache-report")],
         "ramcache-top.1": [sys.executable,
                            os.path.join(ROOT, "report", "ramcache-top")]}
LIBRARY_PAGE = "libramcache.3"
HEADER = os.path.join(ROOT, "include", "ramcache", "ramcache.h")
OPTION_WORD = re.compile(r"^--?[A-Za-z0-9][\w-]*,?$")
BUILT = []


def page(name):
    """The text of page @name, built by `make man` (once)."""
    if not BUILT:
        r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT,
                            f"OUTPUT={OUTPUT}", "man"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        BUILT.append(True)
    with open(os.path.join(OUTPUT, "man", name)) as f:
        return f.read()


def help_options(argv):
    """The options --help lists: every option word that starts a line
    of the option list, and its aliases on that line."""
    r = subprocess.run([*argv, "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    found = set()
    for line in r.stdout.splitlines():
        indent = len(line) - len(line.lstrip())
        if not 0 < indent <= 8 or not line.lstrip().startswith("-"):
            continue
        for word in line.split():
            if not OPTION_WORD.match(word) and not word.isupper():
                break
            if OPTION_WORD.match(word):
                found.add(word.rstrip(","))
    return found


def page_options(roff):
    """The options the page gives an entry (.TP) of their own: a term of
    options (bold), each with at most one argument (italic), then the
    option's description."""
    found = set()
    lines = roff.splitlines() + [""]
    for i, line in enumerate(lines[:-2]):
        if line != ".TP":
            continue
        term = lines[i + 1].replace("\\-", "-")
        opts = re.findall(r"\\fB(--?[A-Za-z0-9][\w-]*)\\fR", term)
        args = re.findall(r"\\fI", term)
        if len(args) <= len(opts) and lines[i + 2][:1] not in ("", "."):
            found.update(opts)
    return found


def check_options(argv, roff):
    """What --help lists that the page has no proper entry for."""
    return help_options(argv) - page_options(roff)


@test
def every_option_in_help_has_an_entry_in_the_man_page():
    for name, argv in PAGES.items():
        opts = help_options(argv)
        missing = check_options(argv, page(name))
        print(f"# {name}: {len(opts)} options in --help, missing {missing}")
        assert len(opts) >= 3, (name, opts)
        assert not missing, (name, missing)


@test
def check_options_finds_an_option_dropped_or_run_into_its_text():
    roff = page("ramcache-bpf.8")
    broken = re.sub(r"\.TP\n\\fB\\-\\-headroom\\fR.*\n.*\n", "", roff)
    assert broken != roff
    assert check_options(PAGES["ramcache-bpf.8"], broken) == {"--headroom"}
    # the term and the text of --metrics as one line, the text empty
    broken = re.sub(r"(\\fB\\-\\-metrics\\fR \\fIADDR:PORT\\fR)\n(.*)\n",
                    lambda m: m.group(1) + " \\fI" + m.group(2) + "\\fR\n",
                    roff)
    assert broken != roff
    assert check_options(PAGES["ramcache-bpf.8"], broken) == {"--metrics"}


def header_functions():
    with open(HEADER) as f:
        code = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    return set(re.findall(r"\b(ramcache_\w+)\s*\(", code))


def synopsis_functions(roff):
    syn = roff.split(".SH SYNOPSIS", 1)[1].split("\n.SH ", 1)[0]
    return set(re.findall(r"\b(ramcache_\w+)\(", syn.replace("\\-", "-")))


@test
def every_function_of_the_header_is_in_the_library_page():
    funcs = header_functions()
    missing = funcs - synopsis_functions(page(LIBRARY_PAGE))
    print(f"# {len(funcs)} functions in ramcache.h, missing {missing}")
    assert len(funcs) >= 10 and not missing, (funcs, missing)


@test
def check_functions_finds_a_function_dropped_from_the_page():
    roff = page(LIBRARY_PAGE)
    broken = re.sub(r"^int ramcache_heartbeat\(.*\n", "", roff, flags=re.M)
    assert broken != roff
    assert header_functions() - synopsis_functions(broken) == \
        {"ramcache_heartbeat"}


def example(roff):
    """The C of the page's EXAMPLE section, as a reader copies it."""
    sect = roff.split(".SH EXAMPLE\n", 1)[1].split("\n.SH ", 1)[0]
    code = sect.split(".nf\n", 1)[1].split("\n.fi", 1)[0]
    code = re.sub(r"^\\&", "", code, flags=re.M)
    return code.replace("\\-", "-").replace("\\e", "\\")


@test
def the_library_pages_example_compiles_and_links():
    work = tempfile.mkdtemp(prefix="ramcache-test-man-")
    try:
        src = os.path.join(work, "example.c")
        with open(src, "w") as f:
            f.write(example(page(LIBRARY_PAGE)) + "\n")
        r = subprocess.run(["cc", "-Wall", "-Werror", "-I",
                            os.path.join(ROOT, "include"), src,
                            os.path.join(OUTPUT, "libramcache.a"), "-o",
                            os.path.join(work, "example")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def groff_reads_every_page_without_a_warning():
    for name in [*PAGES, LIBRARY_PAGE]:
        page(name)
        r = subprocess.run(["man", "--warnings", "-l", "-E", "UTF-8",
                            os.path.join(OUTPUT, "man", name)],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="80", MANPAGER="cat",
                                    LC_ALL="C.UTF-8"))
        assert r.returncode == 0 and not r.stderr.strip(), (name, r.stderr)
        assert "NAME" in r.stdout and "SYNOPSIS" in r.stdout, name


main()
