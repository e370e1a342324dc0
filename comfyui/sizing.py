"""How many bytes of RAM a cached output holds.

Counts CPU tensors once per storage (views and shared weights are not
counted twice) and a model patcher as its model's CPU weights. Pure: takes
objects, touches no globals, so the tests feed it fake tensors.
"""


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
        self._seen = set()

    def add(self, obj, depth=0):
        if obj is None or depth > 32 or isinstance(obj, (str, bytes, int, float, bool)):
            return
        if id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        if _is_tensor(obj):
            if _on_cpu(obj):
                key, n = _storage(obj)
                self.storages[key] = max(n, self.storages.get(key, 0))
            return
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


def entry_size(entry):
    """(bytes, has_model) of a cache entry (CacheEntry or a plain outputs list)."""
    s = Sizer()
    s.add(getattr(entry, "outputs", entry))
    return s.total, s.has_model
