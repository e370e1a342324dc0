"""The prompt-local RAM release callback of newer ComfyUI versions."""
extra_ram_release_callback = None
RAM_CACHE_HEADROOM = 0


def set_ram_cache_release_state(callback, headroom):
    global extra_ram_release_callback, RAM_CACHE_HEADROOM
    extra_ram_release_callback = callback
    RAM_CACHE_HEADROOM = max(0, int(headroom))


def extra_ram_release(target, free_active=False):
    if extra_ram_release_callback is None:
        return 0
    return extra_ram_release_callback(target, free_active=free_active) or 0
