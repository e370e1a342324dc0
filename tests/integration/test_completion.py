#!/usr/bin/env python3
"""Bash completion (contrib/bash-completion/ramcache-bpf) in a real bash
with bash-completion loaded, for the programs of this tree: every long
option of ramcache-bpf, ramcache-report and ramcache-top (and the agent's
through ramcache-top) is offered after "--"; pids after --pid; every
option that takes a value (an argument in --help) has its values
completed, or none, never options, and an option that takes none is
never given values. A completion that lost an option's case fails the
check (check_values_finds_an_option_left_out)."""
import os
import re
import shutil
import subprocess
import tempfile

from rctest import AGENT, ROOT, Skip, main, test  # noqa: E402

COMPLETION = os.path.join(ROOT, "contrib", "bash-completion", "ramcache-bpf")
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"
PROGRAMS = {"ramcache-bpf": AGENT,
            "ramcache-report": os.path.join(ROOT, "report", "ramcache-report"),
            "ramcache-top": os.path.join(ROOT, "report", "ramcache-top")}
FUNCTIONS = {"ramcache-bpf": "_ramcache_bpf",
             "ramcache-report": "_ramcache_report",
             "ramcache-top": "_ramcache_top"}
OPTION_WORD = re.compile(r"^--?[A-Za-z0-9][\w-]*,?$")
BIN = []


def bin_dir():
    """A directory of links to this tree's programs, first on PATH."""
    if not BIN:
        d = tempfile.mkdtemp(prefix="ramcache-test-completion-")
        for name, path in PROGRAMS.items():
            os.symlink(path, os.path.join(d, name))
        BIN.append(d)
    return BIN[0]


def bash(script, completion=COMPLETION):
    """@script run by bash after bash-completion and @completion."""
    if not os.path.exists(BASH_COMPLETION):
        raise Skip("bash-completion missing: run 'sudo make deps'")
    env = dict(os.environ, PATH=bin_dir() + ":" + os.environ["PATH"],
               LC_ALL="C")
    r = subprocess.run(["bash", "--norc", "-c",
                        f". {BASH_COMPLETION}; . {completion}; {script}"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def complete(*words):
    """What bash offers for the command line @words (the last one being
    completed)."""
    line = " ".join(words)
    quoted = " ".join(f"'{w}'" for w in words)
    return bash(f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
                f"COMP_LINE='{line}'; COMP_POINT={len(line)}; "
                f"{FUNCTIONS[words[0]]} '{words[0]}' '{words[-1]}' "
                f"'{words[-2]}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"")


def help_options(name):
    """{option: whether it takes a value} from the program's --help: the
    options that start a line of the option list, and their aliases."""
    r = subprocess.run([PROGRAMS[name], "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    found = {}
    for line in r.stdout.splitlines():
        indent = len(line) - len(line.lstrip())
        if not 0 < indent <= 8 or not line.lstrip().startswith("-"):
            continue
        opts, value = [], False
        term = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        # the description is two spaces away, or one after a long term
        for word in (term[0] if len(term) == 2 else line).split():
            if OPTION_WORD.match(word):
                opts.append(word.rstrip(","))
            elif word.isupper() or "|" in word:
                value = True
            else:
                break
        found.update((o, value) for o in opts)
    return found


@test
def every_long_option_is_offered():
    for name in PROGRAMS:
        want = {o for o in help_options(name) if o.startswith("--")}
        if name == "ramcache-top":  # it passes the rest to the agent
            want |= {o for o in help_options("ramcache-bpf")
                     if o.startswith("--")}
        got = set(complete(name, "--"))
        print(f"# {name} --<TAB>: {len(got)} options")
        assert want and not want - got, (name, want - got)
        assert not got - want, (name, "offered but not in --help",
                                got - want)


@test
def pid_completes_process_ids():
    for words in (("ramcache-bpf", "--pid", ""), ("ramcache-bpf", "-p", ""),
                  ("ramcache-top", "--pid", "")):
        got = complete(*words)
        assert got and all(p.isdigit() for p in got), (words, got[:10])
        assert "1" in got, (words, got[:10])


@test
def values_of_the_words_an_option_takes():
    for words, want in ((("ramcache-bpf", "--policy", ""), {"ram", "cost"}),
                        (("ramcache-bpf", "--probe-mode", ""),
                         {"auto", "tp_btf", "raw_tp"}),
                        (("ramcache-bpf", "--fault-probes", ""), {"auto", "on"}),
                        (("ramcache-bpf", "--on-level", "w"), {"warn:"}),
                        (("ramcache-bpf", "--user", "roo"), {"root"})):
        assert set(complete(*words)) == want, (words, complete(*words))
    cg = complete("ramcache-bpf", "--cgroup", "/")
    assert cg and all(c.startswith("/") and c.endswith("/") for c in cg), cg


def check_values(completion=COMPLETION):
    """The options whose value completion is wrong: one that takes a value
    and gets options or is not handled, or one that takes none and is."""
    wrong = []
    for name in PROGRAMS:
        opts = help_options(name)
        out = bash("for o in " + " ".join(opts) + "; do cur=; "
                   "_ramcache_bpf_value $o >/dev/null 2>&1; echo \"$o $?\"; "
                   "done", completion)
        for line in out:
            opt, rc = line.split()
            if (rc == "0") != opts[opt]:
                wrong.append(f"{name} {opt}: takes a value {opts[opt]}, "
                             f"completed as one {rc == '0'}")
    return wrong


@test
def every_option_that_takes_a_value_is_completed_as_one():
    wrong = check_values()
    assert not wrong, "\n".join(wrong)


@test
def check_values_finds_an_option_left_out():
    work = tempfile.mkdtemp(prefix="ramcache-test-completion-")
    try:
        broken = os.path.join(work, "ramcache-bpf")
        with open(COMPLETION) as f:
            text = f.read()
        text, n = re.subn(r"\t--policy\)\n.*?;;\n", "", text, flags=re.S)
        assert n == 1
        with open(broken, "w") as f:
            f.write(text)
        wrong = check_values(broken)
        assert wrong == ["ramcache-bpf --policy: takes a value True, "
                         "completed as one False"], wrong
    finally:
        shutil.rmtree(work, ignore_errors=True)


try:
    main()
finally:
    for d in BIN:
        shutil.rmtree(d, ignore_errors=True)
