import threading


class InterruptProcessingException(Exception):
    pass


_lock = threading.RLock()
_interrupted = False


def interrupt_current_processing(value=True):
    global _interrupted
    with _lock:
        _interrupted = value


def processing_interrupted():
    with _lock:
        return _interrupted


def throw_exception_if_processing_interrupted():
    global _interrupted
    with _lock:
        if _interrupted:
            _interrupted = False
            raise InterruptProcessingException()


def load_models_gpu(models, memory_required=0, force_patch_weights=False,
                    minimum_memory_required=None, force_full_load=False):
    """Moves models to the compute device; on CPU there is nothing to move.
    It asks each model for the models its patches bring, as upstream does
    before it walks its loaded list."""
    for m in models:
        m.model_patches_models()
    return None


def should_free_pins_for_ram_pressure(shortfall):
    return shortfall > 0  # upstream's answer off Windows


class LoadedModel:
    def __init__(self, model):
        self.model = model
        self.device = model.load_device
        self.unloaded = False

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        """Undoes the model's patches; True: all of it went."""
        self.unloaded = True
        return True

    def __eq__(self, other):
        return self.model is other.model


def cleanup_models_gc():
    """Upstream collects garbage when a loaded model leaked; none here."""
    return None


def unload_all_models():
    """ComfyUI's /free route: every loaded model unloaded."""
    for device in {id(lm.device): lm.device for lm in current_loaded_models}.values():
        free_memory(1e30, device)


def free_memory(memory_required, device, keep_loaded=[]):
    """Unloads the loaded models of @device not in @keep_loaded (all of
    them: memory_required is beyond what a device has), as upstream does
    when the memory it needs is not free; the list of those unloaded."""
    unloaded = []
    for i in range(len(current_loaded_models) - 1, -1, -1):
        lm = current_loaded_models[i]
        if lm.device == device and lm not in keep_loaded and lm.model_unload():
            unloaded.append(current_loaded_models.pop(i))
    return unloaded


# Models loaded by load_models_gpu, newest first. Dynamic-VRAM models
# (comfy_aimdo) need CUDA; the tests put stand-ins of them here to play
# pinned host memory, which real ComfyUI on this machine never has.
current_loaded_models = []


def free_pins(size, evict_active=False, loaded=False):
    """0.25.0's free_pins: the pinned RAM of dynamic models, oldest loaded
    first, those in use only with evict_active (0.33.0 orders the same
    models in tiers: not the running prompt's first)."""
    freed_total = 0
    for loaded_model in reversed(current_loaded_models):
        if size <= 0:
            return freed_total
        model = loaded_model.model
        state = model.model.dynamic_pins[model.load_device] if model.is_dynamic() else None
        if state is not None and (evict_active or not (state["active"] or
                                                       state["current_prompt"])):
            freed = model.partially_unload_ram(size)
            freed_total += freed
            size -= freed
    return freed_total
