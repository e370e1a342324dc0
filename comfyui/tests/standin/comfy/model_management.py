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
    """Moves models to the compute device; on CPU there is nothing to move."""
    return None


def should_free_pins_for_ram_pressure(shortfall):
    return shortfall > 0  # upstream's answer off Windows


def free_pins(size, evict_active=False, loaded=False):
    """Pinned host memory exists only with CUDA (comfy_aimdo); on CPU, as
    in real ComfyUI here, there is none to free."""
    return 0
