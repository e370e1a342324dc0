"""Turns the stand-ins and the torch shims on inside a ComfyUI process
started by realcomfy.py (or in any process that imports ComfyUI's own
modules, such as generate.py).

This file is loaded by path, not as part of a package, so that the
ComfyUI process needs nothing of this repository on its sys.path but the
stand-ins folder. To wire it into realcomfy.py: paste BOOT_LINES into its
BOOT script after its import hooks are installed and before it prints
what it stubbed (right before `print("ramcache-real: stubbed", ...)`),
and give BOOT's format call modelkit=<this file's path> (None leaves
model loading off, as now). Until then, with_modelkit() does the same
to a copy of BOOT.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(HERE, "standins")
TORCHSHIMS = os.path.join(HERE, "torchshims.py")
# The packages the stand-ins folder provides (each only where absent).
PROVIDES = ("safetensors", "einops", "transformers")
ANCHOR = 'print("ramcache-real: stubbed"'


def standins_path():
    """The stand-ins folder. As the first entry of a process's sys.path (or
    PYTHONPATH) it would shadow real packages too; install() serves from it
    only the packages the interpreter lacks."""
    return STANDINS


def install(missing=None):
    """Stand-ins importable for the packages of PROVIDES the interpreter
    lacks (and only those), those dropped from @missing (a launcher's set
    of names it replaces with empty modules), and the torch shims applied
    to torch now or as soon as it is imported. Idempotent; the names it
    serves."""
    served = next((f for f in sys.meta_path if isinstance(f, StandinFinder)), None)
    if served is None:
        served = StandinFinder([n for n in PROVIDES if not _importable(n)])
        sys.meta_path.insert(0, served)
    if missing is not None:
        missing.difference_update(served.names)
    if "torch" in sys.modules:
        torchshims().apply(sys.modules["torch"])
    elif not any(isinstance(f, TorchShimFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchShimFinder())
    return list(served.names)


class StandinFinder(importlib.abc.MetaPathFinder):
    """Finds the top-level packages @names in the stand-ins folder (their
    submodules then come from the package's own __path__)."""

    def __init__(self, names):
        self.names = tuple(names)

    def find_spec(self, name, path, target=None):
        """The stand-in's spec for one of @names, else None."""
        if name not in self.names:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [STANDINS])


def _importable(name):
    """Whether @name is importable from sys.path (a launcher's finder of
    empty modules does not count)."""
    return name in sys.modules or importlib.machinery.PathFinder.find_spec(name) is not None


def torchshims():
    """modelkit/torchshims.py, loaded once by path."""
    name = "ramcache_modelkit_torchshims"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TORCHSHIMS)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


class TorchShimFinder(importlib.abc.MetaPathFinder):
    """Applies the shims right after torch is imported, whichever finder
    imports it: it takes torch's spec from the finders after it on
    sys.meta_path (a launcher's own torch hook included) and wraps the
    spec's exec_module."""

    def find_spec(self, name, path, target=None):
        """torch's spec with the shims run after its module; None for
        anything else."""
        if name != "torch":
            return None
        after = sys.meta_path[sys.meta_path.index(self) + 1:]
        spec = next((s for s in (f.find_spec(name, path, target) for f in after
                                 if hasattr(f, "find_spec")) if s is not None), None)
        if spec is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            torchshims().apply(module)
        spec.loader.exec_module = exec_module
        return spec


FIELD = "{modelkit!r}"
# The lines for realcomfy's BOOT (a format string: FIELD is its one field).
BOOT_LINES = (
    "MODELKIT = " + FIELD + "\n"
    "if MODELKIT:\n"
    "    _mk_spec = importlib.util.spec_from_file_location(\"ramcache_modelkit_boot\", MODELKIT)\n"
    "    _mk = importlib.util.module_from_spec(_mk_spec)\n"
    "    _mk_spec.loader.exec_module(_mk)\n"
    "    _mk.install(missing)\n")


def with_modelkit(boot):
    """@boot (realcomfy's BOOT template) with the modelkit on: its modelkit
    field set to this file when realcomfy has BOOT_LINES in it already,
    else BOOT_LINES inserted, with this file's path, before the line that
    reports the stubs."""
    here = repr(os.path.abspath(__file__))
    if FIELD in boot:
        return boot.replace(FIELD, here)
    if ANCHOR not in boot:
        raise ValueError("realcomfy's BOOT no longer has the line " + ANCHOR)
    return boot.replace(ANCHOR, BOOT_LINES.replace(FIELD, here) + ANCHOR, 1)
