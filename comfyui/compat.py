"""Which ComfyUI this is, as far as the package cares: its cache class, how
its command line sets the RAM cache, and the command line to run it with
beside the agent. Pure: describe() takes what hooks.py reads from ComfyUI.

Seen in real ComfyUI (COMPATIBILITY.md):
  v0.3.64 and older  PromptExecutor(server, cache_type, cache_size); no
                     --cache-ram; --cache-none is DependencyAwareCache
                     (outputs kept only until their readers ran)
  v0.3.7x            cache_args {"lru", "ram"}; --cache-ram takes one value
                     (RAMPressureCache frees any entry below it); --cache-none
                     is NullCache
  newer              cache_args {"lru", "ram", "ram_inactive"}; --cache-ram
                     takes two values; RAM_PRESSURE is the default cache,
                     whose inactive threshold the package sets aside while
                     the agent is attached (ownpolicy.py)
"""
from . import ownpolicy

FAMILY_NO_RAM = "no --cache-ram"
FAMILY_ONE = "one-value --cache-ram"
FAMILY_TWO = "two-value --cache-ram"


def family(cache_args):
    """How this ComfyUI's --cache-ram looks, from the executor's cache_args
    (None in versions whose PromptExecutor takes cache_size instead)."""
    if not isinstance(cache_args, dict) or "ram" not in cache_args:
        return FAMILY_NO_RAM
    if "ram_inactive" in cache_args:
        return FAMILY_TWO
    return FAMILY_ONE


def kind(outputs):
    """'null', 'dependency', 'ram', 'lru' or 'classic' for an outputs cache."""
    if outputs is None or not isinstance(getattr(outputs, "cache", None), dict):
        return "null"
    if hasattr(outputs, "timestamps") or hasattr(outputs, "ram_release"):
        return "ram"
    if isinstance(getattr(outputs, "used_generation", None), dict):
        return "lru"
    if isinstance(getattr(outputs, "descendants", None), dict) and \
            hasattr(outputs, "executed_nodes"):
        return "dependency"
    return "classic"


def command_line(fam):
    """The ComfyUI command line that leaves outputs of earlier prompts to the
    agent, for a --cache-ram family."""
    if fam == FAMILY_TWO:
        return "python main.py"  # its defaults: the package sets the rest aside
    if fam == FAMILY_ONE:
        return "python main.py --cache-ram 1"
    return "python main.py --cache-lru 64"


def advice(fam, kind_, cache_args):
    """(level, message) to log once when the agent is attached, or None
    when ComfyUI already runs as the README says."""
    if kind_ in ("null", "dependency"):
        return None  # bridge.publish says it once, agent or not
    if fam == FAMILY_TWO:
        if kind_ == "ram" and ownpolicy.inactive_threshold(cache_args):
            return ("info", "ComfyUI's inactive threshold (--cache-ram "
                    f"{cache_args.get('ram')} {cache_args.get('ram_inactive')}) is set "
                    "aside while the agent is attached: outputs of earlier prompts stay "
                    "until the agent frees them; its active headroom "
                    f"({cache_args.get('ram')} GB) stays")
        return None
    if fam == FAMILY_ONE:
        if kind_ == "ram":
            return ("info", "this ComfyUI takes one --cache-ram value: it frees "
                    f"cached outputs itself when less than {cache_args.get('ram')} GB "
                    "is available; give the agent a larger --headroom so it acts first")
        return None
    if kind_ == "classic":
        return ("info", "the classic cache keeps only the last prompt's outputs; "
                "'--cache-lru N' keeps more of them for the agent to manage")
    return None


def describe(executor, version=None):
    """A dict for the status route: version, cache type and class, the
    --cache-ram family and the recommended command line."""
    cache_args = getattr(executor, "cache_args", None)
    ct = getattr(executor, "cache_type", None)
    outputs = getattr(getattr(executor, "caches", None), "outputs", None)
    fam = family(cache_args)
    k = kind(outputs)
    return {
        "version": version,
        "cache_type": getattr(ct, "name", None) or ("CLASSIC" if not ct else str(ct)),
        "cache_class": type(outputs).__name__ if outputs is not None else None,
        "cache": k,
        "cache_ram": fam,
        "recommended": command_line(fam),
    }


def comfyui_version():
    """comfyui_version.__version__ when ComfyUI ships it, else None."""
    try:
        import comfyui_version
        return str(comfyui_version.__version__)
    except Exception:
        return None
