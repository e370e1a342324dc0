"""Storages several cache entries hold: counted once, and dropped together.

A LoRA loader's model is a clone of its checkpoint's, sharing its weights.
Sized alone, each entry holding them would count them, and the page would
list more than the process holds; dropping the checkpoint's entry alone
would free nothing while a clone lives. So among the entries holding
models each storage counts on the oldest of them (sizing.owned_bytes), a
command for that entry takes the clones' entries with it, and it is in use
while a clone is. Plain outputs are sized alone, as before (a pass-through
node's output shares its input's storage). Pure but for the weak
references to the caches it is handed.
"""
from . import page as pagemod
from . import sizing


class Shares:
    def __init__(self):
        self.owned = {}  # entry id -> its bytes, a shared storage once
        self.sharers = {}  # entry id -> entries holding storages it owns

    def count(self, rows, sizes, cost):
        """@rows [(eid, (bytes, last, ug, flags, cost), label)] with the
        bytes of model entries counted once and their reload cost
        (@cost(eid, nbytes)) for those bytes; @sizes: entry id -> memo
        (id, bytes, has_model, plain, storages)."""
        self.owned, self.sharers = sizing.owned_bytes(
            {eid: sizes[eid][4] for eid, _, _ in rows if sizes[eid][2]})
        active = {eid for eid, row, _ in rows if row[3] & pagemod.F_ACTIVE}
        out = []
        for eid, row, label in rows:
            nbytes, flags, c = self.owned.get(eid, row[0]), row[3], row[4]
            if nbytes != row[0] and flags & pagemod.F_MODEL:
                c = cost(eid, nbytes)
            if any(e in active for e in self.sharers.get(eid, ())):
                flags |= pagemod.F_ACTIVE
            out.append((eid, (nbytes, row[1], row[2], flags, c), label))
        return out

    def group(self, eid, where):
        """[(entry id, cache, key)] of @eid and of the entries sharing the
        storages it owns, which go with it; only those still cached, and []
        when @eid is not. @where: entry id -> (weakref(cache), key)."""
        out = []
        for e in [eid] + list(self.sharers.get(eid, ())):
            w = where.get(e)
            cache = w[0]() if w else None
            if cache is not None and w[1] in getattr(cache, "cache", {}):
                out.append((e, cache, w[1]))
            elif e == eid:
                return []
        return out

    def bytes_of(self, eid, default):
        return self.owned.get(eid, default)

    def forget(self, eid):
        self.owned.pop(eid, None)
