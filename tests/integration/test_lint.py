#!/usr/bin/env python3
"""Static checks as test cases: `make lint` (cppcheck), `make
check-format` (clang-format with the repo's .clang-format), the floors
of user/'s folders (what each may include and call), the README's code map
against user/'s folders, no function over 80 lines, and no sys.path edit
outside the comfyui suites' own bootstrap."""
import ast
import glob
import os
import re
import subprocess

from rctest import ROOT, main, test


def make(target):
    r = subprocess.run(["make", "-s", "--no-print-directory", target],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 0, "\n".join(out[-60:])


@test
def cppcheck_is_clean():
    make("lint")


@test
def clang_format_is_clean():
    make("check-format")


# user/'s folders, each with the folders it may include from: core/ is
# pure, proc/ reads files, page/ is the control page, kernel/ the only user
# of libbpf; executors/ and emit/ put them together; user/ itself is the loop.
FLOORS = {
    "core": {"core"},
    "proc": {"core", "proc"},
    "page": {"core", "proc", "page"},
    "kernel": {"core", "proc", "page", "kernel"},
    "emit": {"core", "proc", "page", "kernel", "emit"},
    "executors": {"core", "proc", "page", "kernel", "emit", "executors"},
}
INCLUDE = re.compile(r'^#include\s+"([a-z]+)/[^"]+"', re.M)
LIBBPF = re.compile(r'^#include\s+[<"](bpf/libbpf\.h|bpf/bpf\.h|[a-z]+\.skel\.h)[>"]',
                    re.M)
# what "pure" rules out in core/: files, the clock, processes, printing
IO_CALL = re.compile(r"\b(open|openat|fopen|read|pread|write|stat|fstat|"
                     r"opendir|readlink|mmap|clock_gettime|syscall|fprintf|"
                     r"printf|kill|fork|execve?)\s*\(")


def user_files(folder):
    return sorted(glob.glob(os.path.join(ROOT, "user", folder, "*.[ch]")))


def floor_breaks():
    bad = []
    for folder, allowed in FLOORS.items():
        for path in user_files(folder):
            with open(path) as f:
                text = f.read()
            rel = os.path.relpath(path, ROOT)
            bad += [f"{rel} includes {d}/" for d in INCLUDE.findall(text)
                    if d not in allowed | {"ramcache"}]
            if folder != "kernel" and LIBBPF.search(text):
                bad.append(f"{rel} uses libbpf outside kernel/")
            code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
            if folder == "core" and IO_CALL.search(code):
                bad.append(f"{rel} does I/O: {IO_CALL.search(code).group(0)}")
    for path in user_files(""):
        with open(path) as f:
            if LIBBPF.search(f.read()):
                bad.append(f"{os.path.relpath(path, ROOT)} uses libbpf "
                           "outside kernel/")
    return bad


@test
def user_folders_keep_their_floors():
    """core/ pure, kernel/ the only user of libbpf, each folder including
    only from the folders under it (see the README's code map)."""
    assert os.path.isdir(os.path.join(ROOT, "user", "core"))
    bad = floor_breaks()
    assert not bad, "\n".join(bad)


@test
def code_map_names_every_folder_of_user():
    """The README's code map has one row for each folder of user/, and no
    row for a folder that is gone."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert "## Code map" in text, "README has no code map"
    rows = re.findall(r"^\| `user/([a-z_]*)/?` \|", text, re.M)
    tree = sorted(d for d in os.listdir(os.path.join(ROOT, "user"))
                  if os.path.isdir(os.path.join(ROOT, "user", d)))
    assert sorted(r for r in rows if r) == tree and rows.count("") == 1, \
        f"code map rows user/{rows}, folders {tree}"


MAX_LINES = 80
C_FOLDERS = ("user", "lib", "demo", "tests", "bpf")
PY_FOLDERS = ("python", "comfyui", "bench", "tests", "rctest", "report",
              "contrib")
SKIP_DIRS = {"node_modules", "__pycache__", "build"}
# a line before which a C function's head cannot start
C_BEFORE_HEAD = re.compile(r"[;}]\s*$|\*/\s*$|^\s*#|^\s*$")


def python_program(path):
    """A file without the suffix that is a Python program (its first line
    names python): ramcache-report, ramcache-top."""
    if "." in os.path.basename(path):
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def source_files(folders, exts, root=ROOT):
    """Files under @folders ending in one of @exts (with .py, Python
    programs without the suffix too); links (the rctest links, each a copy
    of rctest/) and build outputs left out."""
    for folder in folders:
        for top, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(
                d for d in dirs if not d.startswith(".") and
                d not in SKIP_DIRS and not os.path.islink(os.path.join(top, d)))
            yield from (os.path.join(top, n) for n in sorted(files)
                        if n.endswith(exts) or (".py" in exts and
                                                python_program(os.path.join(top, n))))


def c_functions(text):
    """(name, first line, lines) of each function in kernel-style C: its
    body opens with a `{` alone at the start of a line (clang-format puts
    it there, and nowhere else) and ends with the next `}` there; its head
    runs back to the line after a `;`, `}`, comment, directive or blank."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line != "{":
            continue
        start = i
        while start > 0 and not C_BEFORE_HEAD.search(lines[start - 1]):
            start -= 1
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "}"),
                   len(lines) - 1)
        name = re.search(r"(\w+)\s*\(", " ".join(lines[start:i]))
        yield (name.group(1) if name else "?"), start + 1, end - start + 1


def py_functions(text):
    """(name, first line, lines) of each function and method, nested ones
    too (an outer function's lines include theirs)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def long_functions(root=ROOT):
    """'path:line name() is N lines' for each function over MAX_LINES."""
    found = []
    for exts, folders, parse in (((".c", ".h"), C_FOLDERS, c_functions),
                                 ((".py",), PY_FOLDERS, py_functions)):
        for path in source_files(folders, exts, root):
            with open(path, errors="replace") as f:
                funcs = list(parse(f.read()))
            found += [f"{os.path.relpath(path, root)}:{line} {name}() is "
                      f"{n} lines" for name, line, n in funcs
                      if n > MAX_LINES]
    return found


# The loop files, which regrow after each split: a size they stay under.
MAX_FILE_LINES = {"user/agent.c": 800, "user/executors/evictor.c": 600,
                  "comfyui/bridge.py": 1000}


@test
def the_loop_files_stay_under_their_size():
    """The agent's loop, the evictor and the ComfyUI bridge each stay under
    the size given here: a file that grows past it is a module to split."""
    big = []
    for rel, most in MAX_FILE_LINES.items():
        with open(os.path.join(ROOT, rel)) as f:
            n = sum(1 for _ in f)
        if n > most:
            big.append(f"{rel} is {n} lines (at most {most})")
    assert not big, "\n".join(big)


@test
def python_programs_without_a_suffix_are_linted():
    """ramcache-report and ramcache-top have no .py: the 80-line rule still
    reads them."""
    found = {os.path.basename(p) for p in source_files(("report",), (".py",))}
    assert {"ramcache-report", "ramcache-top"} <= found, sorted(found)


@test
def no_function_is_over_80_lines():
    """No C function in user/, lib/, demo/, tests/, bpf/ and no Python
    function in python/, comfyui/, bench/, tests/, rctest/, report/,
    contrib/ is over 80 lines, its head and closing brace counted."""
    counted = sum(1 for _ in source_files(C_FOLDERS, (".c",)))
    assert counted > 100, f"only {counted} C files found under {ROOT}"
    long = long_functions()
    assert not long, "\n".join(long)


# The files that may edit sys.path: the comfyui suites' bootstrap (their
# stand-in ComfyUI, imported by every one of them) and the viewers, which
# find their rcviz beside them or, installed, in lib/ramcache-bpf.
# Everything else finds project modules through rctest (py_env for a
# child's PYTHONPATH, import_package for a package loaded by file).
SYS_PATH_EDITORS = {"comfyui/tests/env.py", "report/ramcache-report",
                    "report/ramcache-top"}
# an edit written in a string: code a test runs with python -c or writes
# into a script
SYS_PATH_EDIT = re.compile(r"\bsys\.path\s*(?:\.\s*(?:insert|append|extend)\s*\(|"
                           r"(?:\[[^\]\n]*\])?\s*\+?=(?!=))")


def is_sys_path(node):
    return (isinstance(node, ast.Attribute) and node.attr == "path" and
            isinstance(node.value, ast.Name) and node.value.id == "sys")


def docstrings(tree):
    """The string nodes that are docstrings (prose, not code)."""
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                              ast.AsyncFunctionDef)) and n.body and
            isinstance(n.body[0], ast.Expr) and
            isinstance(n.body[0].value, ast.Constant) and
            isinstance(n.body[0].value.value, str)}


def sys_path_edits(text):
    """Line numbers of the sys.path edits in @text: in its code (an
    assignment to sys.path or a slice of it, +=, insert, append, extend)
    and in its strings other than docstrings (programs run with -c).
    Comments and docstrings that name sys.path are not edits."""
    tree = ast.parse(text)
    docs = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs:
                found += [node.lineno + node.value.count("\n", 0, m.start())
                          for m in SYS_PATH_EDIT.finditer(node.value)]
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and is_sys_path(f.value) and \
                    f.attr in ("insert", "append", "extend"):
                found.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) or (isinstance(t, ast.Subscript) and
                                      is_sys_path(t.value)) for t in targets):
                found.append(node.lineno)
    return sorted(found)


@test
def only_the_listed_files_edit_sys_path():
    """No Python file but SYS_PATH_EDITORS edits sys.path, in its code or
    in a program it runs: a child gets its path from PYTHONPATH
    (rctest.py_env), a package outside the path is loaded by file
    (rctest.import_package). The check itself finds every kind of edit
    and no prose."""
    # {p} for sys.path, so that this file holds no edit itself
    sample = ('"""Puts x on {p}; {p}.insert(0, x) in a docstring."""\n'
              "# {p}.append(x) in a comment\n"
              "import sys\n{p}.insert(0, 'a')\n{p}.append('a')\n"
              "{p}.extend(['a'])\n{p}[:0] = ['a']\n{p} = ['a']\n"
              "{p} += ['a']\nok = {p} == ['a']\n"
              'CODE = """\nimport sys\n{p}.insert(0, sys.argv[1])\n"""\n'
              ).format(p="sys.path")
    assert sys_path_edits(sample) == [4, 5, 6, 7, 8, 9, 13], sys_path_edits(sample)
    folders = sorted(d for d in os.listdir(ROOT) if not d.startswith(".") and
                     d not in SKIP_DIRS and os.path.isdir(os.path.join(ROOT, d)))
    edits = []
    for path in source_files(folders, (".py",)):
        rel = os.path.relpath(path, ROOT)
        if rel in SYS_PATH_EDITORS:
            continue
        with open(path, errors="replace") as f:
            edits += [f"{rel}:{n}" for n in sys_path_edits(f.read())]
    assert not edits, "sys.path edited outside " + ", ".join(
        sorted(SYS_PATH_EDITORS)) + ":\n" + "\n".join(edits)


main()
