"""How many bytes of RAM a cached output holds, and whether it is plain.

Counts CPU tensors once per storage (views and shared weights are not
counted twice) and a model patcher as its model's CPU weights. An output is
plain when it holds nothing but tensors, scalars, strings and the builtin
containers: dropping it runs no Python code of ComfyUI or of a node (no
__del__, no weakref finalizer such as a model's), so any thread may. Pure:
takes objects, touches no globals, so the tests feed it fake tensors.
"""

_SCALARS = (str, bytes, int, float, bool, complex, type(None))


def _is_tensor(x):
    return hasattr(x, "numel") and hasattr(x, "element_size") and hasattr(x, "device")


def _on_cpu(t):
    dev = t.device
    return getattr(dev, "type", dev) == "cpu"


def _storage(t):
    """(identity, bytes) of the memory behind tensor t."""
    get = getattr(t, "untyped_storage", None) or getattr(t, "storage", None)
    if get is not None:
        try:
            s = get()
            ptr = s.data_ptr()
            n = s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()
            return ptr, int(n)
        except Exception:  # meta tensors, odd subclasses: fall back to the view
            pass
    return id(t), t.numel() * t.element_size()


def _plain_container(x):
    """A builtin container, or a subclass that can neither carry a weakref
    finalizer nor define __del__ (a NamedTuple such as CacheEntry)."""
    t = type(x)
    return isinstance(x, (dict, list, tuple, set, frozenset)) and \
        t.__weakrefoffset__ == 0 and not hasattr(t, "__del__")


def is_model_patcher(x):
    """ModelPatcher or a subclass (CoreModelPatcher, ModelPatcherDynamic)."""
    return any(c.__name__ == "ModelPatcher" for c in type(x).__mro__)


def _model_tensors(model):
    seen = set()
    for fn in ("parameters", "buffers"):
        get = getattr(model, fn, None)
        if get is None:
            continue
        for t in get():
            if id(t) not in seen:
                seen.add(id(t))
                yield t


class Sizer:
    """Accumulates the CPU bytes of everything fed to it, one storage once."""

    def __init__(self):
        self.storages = {}
        self.has_model = False
        self.plain = True
        self._seen = set()

    def add(self, obj, depth=0):
        if isinstance(obj, _SCALARS):
            return
        if depth > 32:
            self.plain = False  # not looked at: not known to be plain
            return
        if id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        if _is_tensor(obj):
            if _on_cpu(obj):
                key, n = _storage(obj)
                self.storages[key] = max(n, self.storages.get(key, 0))
            return
        if not _plain_container(obj):
            self.plain = False
        if is_model_patcher(obj):
            self.has_model = True
            model = getattr(obj, "model", None)
            if model is not None:
                for t in _model_tensors(model):
                    self.add(t, depth + 1)
            return
        patcher = getattr(obj, "patcher", None)  # CLIP, VAE
        if patcher is not None and is_model_patcher(patcher):
            self.add(patcher, depth + 1)
            return
        if isinstance(obj, dict):
            for v in obj.values():
                self.add(v, depth + 1)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for v in obj:
                self.add(v, depth + 1)

    @property
    def total(self):
        return sum(self.storages.values())


def entry_sizing(entry):
    """(bytes, has_model, plain, storages) of a cache entry (CacheEntry or
    an outputs list): its outputs' bytes, plain when its outputs and ui
    are, and {storage identity: bytes} of what those bytes count."""
    s = Sizer()
    s.add(getattr(entry, "outputs", entry))
    nbytes, storages = s.total, dict(s.storages)
    ui = getattr(entry, "ui", None)
    if ui is not None:
        s.add(ui)
    return nbytes, s.has_model, s.plain, storages


def owned_bytes(storages_of):
    """({entry id: bytes}, {entry id: [sharers]}) from {entry id:
    {storage: bytes}}: each storage counted once, on the oldest entry
    (lowest id) holding it, and for each entry the others holding a
    storage it owns. A LoRA loader's model is a clone sharing its
    checkpoint's weights: sized alone, each holder would count them, and
    the sum would be more than the process holds. While a sharer lives,
    dropping the owner frees none of those bytes: its eviction takes the
    sharers with it. One pass over the storages."""
    owner, owned, shares = {}, {}, {}
    for eid in sorted(storages_of):
        n = 0
        for k, b in storages_of[eid].items():
            first = owner.setdefault(k, eid)
            if first == eid:
                n += b
            elif eid not in shares.setdefault(first, []):
                shares[first].append(eid)
        owned[eid] = n
    return owned, shares
