import types

# Two-value --cache-ram (active, inactive GB), as in newer ComfyUI.
args = types.SimpleNamespace(cache_classic=False, cache_lru=0, cache_none=False,
                             cache_ram=[])
