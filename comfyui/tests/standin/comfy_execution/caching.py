"""Stand-in of comfy_execution/caching.py: the cache classes, their
attributes and ram_release's bookkeeping. Keys are plain hashable tuples."""
import time


# Overridden by the tests to play "available RAM" for ram_release.
def virtual_memory_available():
    return 1 << 62


def _is_link(v):
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)


class CacheKeySet:
    def __init__(self, dynprompt, node_ids, is_changed_cache):
        self.keys = {}
        self.subcache_keys = {}
        self.is_changed_cache = is_changed_cache

    def all_node_ids(self):
        return set(self.keys.keys())

    def get_used_keys(self):
        return self.keys.values()

    def get_used_subcache_keys(self):
        return self.subcache_keys.values()

    def get_data_key(self, node_id):
        return self.keys.get(node_id, None)

    def get_subcache_key(self, node_id):
        return self.subcache_keys.get(node_id, None)


class CacheKeySetID(CacheKeySet):
    def __init__(self, dynprompt, node_ids, is_changed_cache):
        super().__init__(dynprompt, node_ids, is_changed_cache)
        self.dynprompt = dynprompt

    async def add_keys(self, node_ids):
        for node_id in node_ids:
            if node_id in self.keys or not self.dynprompt.has_node(node_id):
                continue
            node = self.dynprompt.get_node(node_id)
            self.keys[node_id] = (node_id, node["class_type"])
            self.subcache_keys[node_id] = (node_id, node["class_type"])


class CacheKeySetInputSignature(CacheKeySet):
    def __init__(self, dynprompt, node_ids, is_changed_cache):
        super().__init__(dynprompt, node_ids, is_changed_cache)
        self.dynprompt = dynprompt

    async def add_keys(self, node_ids):
        for node_id in node_ids:
            if node_id in self.keys or not self.dynprompt.has_node(node_id):
                continue
            node = self.dynprompt.get_node(node_id)
            self.keys[node_id] = await self.signature(node_id)
            self.subcache_keys[node_id] = (node_id, node["class_type"])

    async def signature(self, node_id):
        """Class, IS_CHANGED value and inputs, ancestors' signatures in
        place of links: a node whose IS_CHANGED changes changes the key of
        every node after it, as upstream's get_node_signature does."""
        node = self.dynprompt.get_node(node_id)
        changed = False
        if self.is_changed_cache is not None:
            changed = await self.is_changed_cache.get(node_id)
        parts = [node["class_type"], changed]
        for name in sorted(node["inputs"]):
            v = node["inputs"][name]
            if _is_link(v):
                parts.append((name, ("LINK", await self.signature(v[0]), v[1])))
            else:
                parts.append((name, v))
        return tuple(parts)


class BasicCache:
    def __init__(self, key_class, enable_providers=False):
        self.key_class = key_class
        self.initialized = False
        self.cache = {}
        self.subcaches = {}

    async def set_prompt(self, dynprompt, node_ids, is_changed_cache):
        self.dynprompt = dynprompt
        self.cache_key_set = self.key_class(dynprompt, node_ids, is_changed_cache)
        await self.cache_key_set.add_keys(node_ids)
        self.is_changed_cache = is_changed_cache
        self.initialized = True

    def all_node_ids(self):
        ids = self.cache_key_set.all_node_ids()
        for sub in self.subcaches.values():
            ids = ids.union(sub.all_node_ids())
        return ids

    def _clean_cache(self):
        keep = set(self.cache_key_set.get_used_keys())
        for key in [k for k in self.cache if k not in keep]:
            del self.cache[key]

    def _clean_subcaches(self):
        keep = set(self.cache_key_set.get_used_subcache_keys())
        for key in [k for k in self.subcaches if k not in keep]:
            del self.subcaches[key]

    def clean_unused(self):
        self._clean_cache()
        self._clean_subcaches()

    def get_local(self, node_id):
        if not self.initialized:
            return None
        return self.cache.get(self.cache_key_set.get_data_key(node_id))

    def set_local(self, node_id, value):
        self.cache[self.cache_key_set.get_data_key(node_id)] = value

    async def _set_immediate(self, node_id, value):
        self.cache[self.cache_key_set.get_data_key(node_id)] = value

    async def _get_immediate(self, node_id):
        if not self.initialized:
            return None
        return self.cache.get(self.cache_key_set.get_data_key(node_id))

    async def _ensure_subcache(self, node_id, children_ids):
        key = self.cache_key_set.get_subcache_key(node_id)
        sub = self.subcaches.get(key)
        if sub is None:
            sub = BasicCache(self.key_class)
            self.subcaches[key] = sub
        await sub.set_prompt(self.dynprompt, children_ids, self.is_changed_cache)
        return sub

    def _get_subcache(self, node_id):
        return self.subcaches.get(self.cache_key_set.get_subcache_key(node_id))


class HierarchicalCache(BasicCache):
    def _get_cache_for(self, node_id):
        parent_id = self.dynprompt.get_parent_node_id(node_id)
        if parent_id is None:
            return self
        hierarchy = []
        while parent_id is not None:
            hierarchy.append(parent_id)
            parent_id = self.dynprompt.get_parent_node_id(parent_id)
        cache = self
        for parent_id in reversed(hierarchy):
            cache = cache._get_subcache(parent_id)
            if cache is None:
                return None
        return cache

    async def get(self, node_id):
        cache = self._get_cache_for(node_id)
        return None if cache is None else await cache._get_immediate(node_id)

    def get_local(self, node_id):
        cache = self._get_cache_for(node_id)
        return None if cache is None else BasicCache.get_local(cache, node_id)

    async def set(self, node_id, value):
        await self._get_cache_for(node_id)._set_immediate(node_id, value)

    def set_local(self, node_id, value):
        BasicCache.set_local(self._get_cache_for(node_id), node_id, value)

    async def ensure_subcache_for(self, node_id, children_ids):
        return await self._get_cache_for(node_id)._ensure_subcache(node_id, children_ids)


class NullCache:
    async def set_prompt(self, dynprompt, node_ids, is_changed_cache):
        pass

    def all_node_ids(self):
        return []

    def clean_unused(self):
        pass

    async def get(self, node_id):
        return None

    def get_local(self, node_id):
        return None

    async def set(self, node_id, value):
        pass

    def set_local(self, node_id, value):
        pass

    async def ensure_subcache_for(self, node_id, children_ids):
        return self


class LRUCache(BasicCache):
    def __init__(self, key_class, max_size=100, enable_providers=False):
        super().__init__(key_class)
        self.max_size = max_size
        self.min_generation = 0
        self.generation = 0
        self.used_generation = {}
        self.children = {}

    async def set_prompt(self, dynprompt, node_ids, is_changed_cache):
        await super().set_prompt(dynprompt, node_ids, is_changed_cache)
        self.generation += 1
        for node_id in node_ids:
            self._mark_used(node_id)

    def clean_unused(self):
        while len(self.cache) > self.max_size and self.min_generation < self.generation:
            self.min_generation += 1
            for key in [k for k in self.cache if self.used_generation[k] < self.min_generation]:
                del self.cache[key]
                del self.used_generation[key]
                self.children.pop(key, None)
        self._clean_subcaches()

    def _mark_used(self, node_id):
        key = self.cache_key_set.get_data_key(node_id)
        if key is not None:
            self.used_generation[key] = self.generation

    async def get(self, node_id):
        self._mark_used(node_id)
        return await self._get_immediate(node_id)

    async def set(self, node_id, value):
        self._mark_used(node_id)
        return await self._set_immediate(node_id, value)

    def set_local(self, node_id, value):
        self._mark_used(node_id)
        BasicCache.set_local(self, node_id, value)

    async def ensure_subcache_for(self, node_id, children_ids):
        await super()._ensure_subcache(node_id, children_ids)
        await self.cache_key_set.add_keys(children_ids)
        self._mark_used(node_id)
        key = self.cache_key_set.get_data_key(node_id)
        self.children[key] = []
        for child_id in children_ids:
            self._mark_used(child_id)
            self.children[key].append(self.cache_key_set.get_data_key(child_id))
        return self


RAM_CACHE_LARGE_INTERMEDIATE = 512 * 1024 ** 2
RAM_CACHE_HYSTERESIS = 1.1  # 0.3.7x poll()


def _cpu_bytes(outputs):
    n = 0
    for o in outputs or ():
        if isinstance(o, (list, tuple)):
            n += _cpu_bytes(o)
        elif hasattr(o, "numel") and getattr(o.device, "type", None) == "cpu":
            n += o.numel() * o.element_size()
    return n


class RAMPressureCache(LRUCache):
    def __init__(self, key_class, enable_providers=False):
        super().__init__(key_class, 0)
        self.timestamps = {}

    def clean_unused(self):
        self._clean_subcaches()

    async def set(self, node_id, value):
        self.timestamps[self.cache_key_set.get_data_key(node_id)] = time.time()
        await super().set(node_id, value)

    async def get(self, node_id):
        self.timestamps[self.cache_key_set.get_data_key(node_id)] = time.time()
        return await super().get(node_id)

    def set_local(self, node_id, value):
        self.timestamps[self.cache_key_set.get_data_key(node_id)] = time.time()
        super().set_local(node_id, value)

    def ram_release(self, target, free_active=False, min_entry_size=0):
        """0.33.0: oldest generation first, then oldest touch; same
        bookkeeping; the bytes of CPU tensors freed."""
        if virtual_memory_available() >= target:
            return 0
        order = sorted(
            (k for k in self.cache
             if (free_active or self.used_generation[k] != self.generation)
             and _cpu_bytes(self.cache[k].outputs) >= min_entry_size),
            key=lambda k: (self.used_generation[k], self.timestamps[k]))
        freed = 0
        while virtual_memory_available() < target and order:
            key = order.pop(0)
            freed += _cpu_bytes(self.cache[key].outputs)
            del self.cache[key]
            self.used_generation.pop(key, None)
            self.timestamps.pop(key, None)
            self.children.pop(key, None)
        return freed

    def poll(self, ram_headroom):
        """0.3.7x, after every node: every entry may go (active ones too)
        while less than ram_headroom GB is available."""
        gb = 1024 ** 3
        if virtual_memory_available() > ram_headroom * gb:
            return
        order = sorted(self.cache, key=lambda k: (self.used_generation[k],
                                                  self.timestamps[k]))
        while virtual_memory_available() < ram_headroom * gb * RAM_CACHE_HYSTERESIS \
                and order:
            del self.cache[order.pop(0)]
