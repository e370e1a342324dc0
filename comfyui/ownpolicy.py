"""ComfyUI's own RAM policy beside the agent: what the package sets aside,
what it keeps, per version, and the wrappers that do it.

Seen in the real trees (COMPATIBILITY.md):
  0.25.0, 0.33.0  RAMPressureCache is the default. After every node,
                  execute_async calls outputs.ram_release(inactive), which
                  drops outputs of earlier prompts while psutil's host-wide
                  available memory is below --cache-ram's second value
                  (default: all of RAM, so always), then frees active
                  entries and pins below the first value (the active
                  headroom; also asked for by extra_ram_release before
                  models pin or load). The inactive call is set aside
                  while the agent's heartbeat is live: the agent frees
                  those outputs when the kernel's view of the cgroup says
                  memory is short. The active headroom stays: it acts only
                  when the host itself is nearly full, as ComfyUI's backstop.
  0.3.75          RAMPressureCache (opt-in, --cache-ram GB) frees entries in
                  poll() only below GB available: kept (nothing is dropped
                  with room). The classic default is kept.
  0.3.64          classic or --cache-lru N: kept (the classic cache has no
                  notion of an earlier prompt's output; the LRU size is the
                  user's).

Every wrapper is an attribute of the one output cache instance the package
serves (never the class), so executors that nodes build stay untouched,
and ComfyUI's own frees drop the entries from the page at once.
"""
import functools

GiB = 1 << 30
_MARK = "__ramcache_own__"
SET_ASIDE = "set aside while the agent is attached"


def _gb(cache_args, name):
    try:
        return int(float(cache_args[name]) * GiB)
    except (KeyError, TypeError, ValueError):
        return None


def inactive_threshold(cache_args):
    """Bytes of ComfyUI's inactive threshold when it is one to set aside
    (above the active one), else None."""
    if not isinstance(cache_args, dict):
        return None
    inactive, active = _gb(cache_args, "ram_inactive"), _gb(cache_args, "ram")
    if not inactive or active is None or inactive <= active:
        return None
    return inactive


def is_inactive_call(cache_args, target, free_active):
    """ram_release(target) is execute_async's inactive-threshold call."""
    thr = inactive_threshold(cache_args)
    return thr is not None and not free_active and target == thr


def describe(kind, cache_args):
    """[{"what", "state", "why"}] for the status: ComfyUI's own ways of
    dropping cached outputs in this version, and what the package does with
    each. state: "set aside while the agent is attached", "kept" or "off"."""
    args = cache_args if isinstance(cache_args, dict) else {}
    if kind in ("null", "dependency"):
        return [{"what": "no outputs kept between prompts", "state": "kept",
                 "why": "--cache-none: nothing stays for the agent to manage"}]
    if kind == "classic":
        return [{"what": "classic cache: only the last prompt's outputs stay",
                 "state": "kept",
                 "why": "it has no earlier-prompt entries to leave to the agent; "
                        "--cache-lru N or --cache-ram keep more"}]
    if kind == "lru":
        return [{"what": f"LRU cache: at most {args.get('lru')} outputs", "state": "kept",
                 "why": "a size the user chose"}]
    out = []
    if "ram_inactive" in args:
        thr = inactive_threshold(args)
        if thr is None:
            out.append({"what": f"inactive threshold ({args.get('ram_inactive')} GB): "
                                "drops outputs of earlier prompts after every node",
                        "state": "off", "why": "not above the active headroom"})
        else:
            out.append({"what": f"inactive threshold ({args.get('ram_inactive')} GB): "
                                "drops outputs of earlier prompts after every node "
                                "while host available RAM is below it",
                        "state": SET_ASIDE,
                        "why": "with room it drops them anyway; the agent frees "
                               "them when the cgroup is really short"})
        out.append({"what": f"active headroom ({args.get('ram')} GB): frees cached "
                            "outputs and pinned memory when host available RAM is "
                            "below it",
                    "state": "kept", "why": "only when the host is nearly full: "
                                           "ComfyUI's backstop"})
    else:
        out.append({"what": f"RAM cache poll ({args.get('ram')} GB): frees cached "
                            "outputs when host available RAM is below it",
                    "state": "kept", "why": "only when the host is short"})
    return out


def adopt(outputs, bridge):
    """Wrap ram_release, poll and clean_unused of this output cache
    instance (once). Returns the names wrapped."""
    done = []
    for name, make in (("ram_release", _wrap_ram_release),
                       ("poll", _wrap_freeing), ("clean_unused", _wrap_freeing)):
        orig = getattr(outputs, name, None)
        if orig is None or not callable(orig):
            continue
        if not getattr(orig, _MARK, False):
            wrapped = make(orig, bridge)
            setattr(wrapped, _MARK, True)
            try:
                setattr(outputs, name, wrapped)
            except AttributeError:
                continue  # __slots__: leave it
        done.append(name)
    return done


def _wrap_ram_release(orig, bridge):
    @functools.wraps(orig)
    def ram_release(*args, **kwargs):
        target = args[0] if args else kwargs.get("target")
        free_active = args[1] if len(args) > 1 else kwargs.get("free_active", False)
        if bridge.agent_alive() and bridge.agent_takes_models() and \
                is_inactive_call(bridge.cache_args(), target, free_active):
            bridge.set_aside_calls += 1
            return 0
        return bridge.own_release(orig, *args, **kwargs)
    return ram_release


def _wrap_freeing(orig, bridge):
    @functools.wraps(orig)
    def freeing(*args, **kwargs):
        return bridge.own_release(orig, *args, **kwargs)
    return freeing
