#!/usr/bin/env python3
"""The numbers the comfyui package and the ramcache module it imports
(python/ramcache) copy from include/ramcache/control.h
(label length, ack statuses, entry flags, level and reason names, and any
other module-level NAME whose RAMCACHE_NAME the header defines) match the
header. Read with ast, so nothing of ComfyUI or the library is imported."""
import ast
import glob
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(PKG)
from rctest import main, test

HEADER = os.path.join(ROOT, "include", "ramcache", "control.h")


def c_int(text):
    """A header value: 48, 0x31ULL, (1u << 2)."""
    text = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", text.strip())
    return eval_int(ast.parse(text, mode="eval").body)


def eval_int(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift):
        return eval_int(node.left) << eval_int(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return eval_int(node.left) * eval_int(node.right)
    raise ValueError(ast.dump(node))


def header():
    """{NAME: int} of the #defines and enum members, and the reason names
    of ramcache_reason_name()."""
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    vals = {}
    for name, val in re.findall(r"^#define\s+(RAMCACHE_\w+)\s+(.+)$", text,
                                re.M):
        try:
            vals[name] = c_int(val)
        except (SyntaxError, ValueError):
            pass  # strings, function-like macros
    for body in re.findall(r"enum\s+ramcache_\w+\s*\{(.*?)\}", text, re.S):
        for name, val in re.findall(r"(RAMCACHE_\w+)\s*=\s*([^,\s]+)", body):
            vals[name] = c_int(val)
    reasons = {vals[f"RAMCACHE_REASON_{n.upper()}"]: n
               for n in re.findall(
                   r'case\s+RAMCACHE_REASON_\w+:\s*return\s+"(\w+)"', text)}
    return vals, reasons


def module_constants(path):
    """Module-level NAME = literal assignments of a Python file."""
    out = {}
    for node in ast.parse(open(path).read()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        try:
            out[name] = eval_int(node.value)
        except ValueError:
            try:
                out[name] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def package_constants():
    """The package's modules and the ramcache module it imports."""
    paths = glob.glob(os.path.join(PKG, "*.py")) + \
        glob.glob(os.path.join(ROOT, "python", "ramcache", "*.py"))
    return {os.path.relpath(p, ROOT): module_constants(p) for p in sorted(paths)}


def check(mods, vals, reasons):
    """Mismatches as strings, and how many constants were compared."""
    bad, checked = [], 0
    levels = [n[len("RAMCACHE_LEVEL_"):].lower()
              for n, _ in sorted(((n, v) for n, v in vals.items()
                                  if n.startswith("RAMCACHE_LEVEL_")),
                                 key=lambda kv: kv[1])]
    for mod, consts in mods.items():
        for name, val in consts.items():
            want = None
            if name == "LEVELS":
                want = tuple(levels)
            elif name == "REASONS":
                want = reasons
            elif f"RAMCACHE_{name}" in vals:
                want = vals[f"RAMCACHE_{name}"]
            if want is None:
                continue
            checked += 1
            got = tuple(val) if name == "LEVELS" else val
            if got != want:
                bad.append(f"{mod}: {name} = {got!r}, control.h says {want!r}")
    return bad, checked


@test
def copied_constants_match_the_header():
    vals, reasons = header()
    assert vals.get("RAMCACHE_LABEL_LEN") and reasons, "header not parsed"
    bad, checked = check(package_constants(), vals, reasons)
    assert not bad, "\n".join(bad)
    # the package copies at least the label length, statuses and flags
    assert checked >= 8, f"only {checked} constants found to compare"


@test
def a_wrong_copy_is_caught():
    vals, reasons = header()
    mods = {"lib.py": {"F_MODEL": 1 << 3, "ACK_BUSY": 3,
                       "LEVELS": ("ok", "high"), "REASONS": {1: "x"}}}
    bad, checked = check(mods, vals, reasons)
    assert checked == 4 and len(bad) == 3, bad


main()
