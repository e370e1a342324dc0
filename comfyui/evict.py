"""ComfyUI's output cache as this package sees it: walk it, find what the
running prompt still needs, and remove an entry with the same bookkeeping
as RAMPressureCache.ram_release (cache dict, used_generation, timestamps,
children).

Every ComfyUI attribute is read with getattr: the cache classes differ
between versions (classic HierarchicalCache with per-expansion subcaches,
LRUCache, RAMPressureCache, DependencyAwareCache, NullCache); compat.kind
names them.
"""


def caches(outputs):
    """The outputs cache and every subcache under it (graph expansion)."""
    stack, seen = [outputs], set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        subs = getattr(c, "subcaches", None)
        if isinstance(subs, dict):
            stack.extend(subs.values())


def walk(outputs):
    """Yield (cache, key, value) for every stored entry, subcaches included."""
    for c in caches(outputs):
        store = getattr(c, "cache", None)
        if isinstance(store, dict):
            for key, value in list(store.items()):
                yield c, key, value


def node_of_key(outputs):
    """{(id(cache), key): node_id} from each cache's key set."""
    out = {}
    for c in caches(outputs):
        keys = getattr(getattr(c, "cache_key_set", None), "keys", None)
        if isinstance(keys, dict):
            for node_id, key in keys.items():
                try:
                    out.setdefault((id(c), key), node_id)
                except TypeError:  # an unhashable key is never in the dict
                    pass
    return out


def generation(outputs):
    """The cache's prompt generation, or None when it keeps none (classic)."""
    g = getattr(outputs, "generation", None)
    return g if isinstance(g, int) else None


def used_generation(outputs, key):
    ug = getattr(outputs, "used_generation", None)
    if isinstance(ug, dict):
        return ug.get(key)
    return None


def is_active(outputs, key):
    """Used by the prompt running now (or the last one, between prompts)."""
    gen = generation(outputs)
    if gen is None:
        return True  # the classic cache only keeps what the prompt uses
    ug = used_generation(outputs, key)
    return ug is not None and ug >= gen


def last_use_wall(outputs, key):
    """RAMPressureCache's time.time() stamp of the last get/set, or None."""
    ts = getattr(outputs, "timestamps", None)
    if isinstance(ts, dict):
        return ts.get(key)
    return None


def locate(outputs, node_id):
    """(cache, key) holding node_id's output, or None."""
    c = outputs
    get_for = getattr(outputs, "_get_cache_for", None)
    if get_for is not None:
        try:
            c = get_for(node_id)
        except Exception:  # no prompt set yet
            return None
        if c is None:
            return None
    ks = getattr(c, "cache_key_set", None)
    if ks is None:
        return None
    try:
        key = ks.get_data_key(node_id)
    except Exception:
        return None
    return None if key is None else (c, key)


def _link_sources(dynprompt, node_id):
    try:
        inputs = dynprompt.get_node(node_id).get("inputs", {})
    except Exception:
        return []
    return [v[0] for v in inputs.values()
            if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str)]


def _pending_sources(execution_list, dynprompt):
    """Versions whose ExecutionList keeps no execution_cache (v0.3.64 and
    older) read a pending node's inputs from the outputs cache when it runs:
    the pending nodes and what their links point at. None when that is not
    enough: no pendingNodes, or a graph expansion in this prompt (an
    expanded node reads its children through links its inputs do not show)."""
    pending = getattr(execution_list, "pendingNodes", None)
    if not isinstance(pending, dict) or dynprompt is None:
        return None
    if getattr(dynprompt, "ephemeral_prompt", None):
        return None
    out = set()
    for node_id in list(pending):
        out.add(node_id)
        out.update(_link_sources(dynprompt, node_id))
    return out


def needed(outputs, running, dynprompt, execution_list):
    """{(id(cache), key)} that must stay: the running node's own entry and
    inputs, and every output a pending node of the execution list listens to.
    None when the execution list is of a version we cannot read: the caller
    then keeps every active entry."""
    node_ids = set()
    if running is not None:
        node_ids.add(running)
        if dynprompt is not None:
            node_ids.update(_link_sources(dynprompt, running))
    if execution_list is not None:
        ec = getattr(execution_list, "execution_cache", None)
        if isinstance(ec, dict):
            for sources in list(ec.values()):
                node_ids.update(sources)
        else:
            sources = _pending_sources(execution_list, dynprompt)
            if sources is None:
                return None
            node_ids.update(sources)
        staged = getattr(execution_list, "staged_node_id", None)
        if staged is not None:
            node_ids.add(staged)
            if dynprompt is not None:
                node_ids.update(_link_sources(dynprompt, staged))
    out = set()
    for node_id in node_ids:
        loc = locate(outputs, node_id)
        if loc is not None:
            out.add((id(loc[0]), loc[1]))
    return out


def remove(cache, key):
    """Drop key from the cache holding it, like ram_release does: the LRU and
    RAM caches keep every entry and its bookkeeping in the root cache, the
    classic cache keeps none. The removed value, or None."""
    store = getattr(cache, "cache", None)
    if not isinstance(store, dict) or key not in store:
        return None
    value = store.pop(key)
    for name in ("used_generation", "timestamps", "children"):
        d = getattr(cache, name, None)
        if isinstance(d, dict):
            d.pop(key, None)
    return value


def wall_to_mono_ns(ts, now_wall, now_mono):
    """A time.time() stamp on the CLOCK_MONOTONIC ns scale of the page."""
    return max(1, now_mono - int(max(0.0, now_wall - ts) * 1e9))
