"""ComfyUI's own memory besides the output cache: pinned host RAM of its
dynamic-VRAM models (comfy_aimdo, CUDA only: 0.25.0 and newer), on the
page as two entries and freed through ComfyUI's own free_pins, never
around it.

ComfyUI's order of release (0.33.0's ram_release and free_pins): models of
earlier workflows first, then pins of models the running prompt does not
use, then intermediates of earlier workflows, what the prompt uses last.
Models of earlier workflows are already on the page as output-cache
entries (their loader's output, flag model, inactive); the pins of models
the prompt does not use are "pins: earlier workflows" (flag model,
inactive: the agent's policy takes inactive models first), those of the
prompt's models "pins: this prompt" (active: last).

Pure: takes comfy.model_management as an argument.
"""

POOLS = {"earlier": "pins:earlier workflows", "prompt": "pins:this prompt"}


def pins(mm):
    """{"earlier": bytes, "prompt": bytes} of pinned host RAM held by
    ComfyUI's dynamic models; {} in versions without free_pins."""
    if mm is None or not callable(getattr(mm, "free_pins", None)):
        return {}
    out = {"earlier": 0, "prompt": 0}
    for lm in list(getattr(mm, "current_loaded_models", ()) or ()):
        m = getattr(lm, "model", None)
        dynamic = getattr(m, "is_dynamic", None)
        try:
            if m is None or dynamic is None or not dynamic():
                continue
            state = m.model.dynamic_pins[m.load_device]
            n = int(m.loaded_ram_size())
        except Exception:  # a model half built or torn down: not counted
            continue
        used = state.get("current_prompt") or state.get("active")
        out["prompt" if used else "earlier"] += max(0, n)
    return out


def free(mm, pool, nbytes):
    """Free nbytes of a pool with ComfyUI's free_pins (its own tiers: the
    prompt's pins only for the "prompt" pool). Bytes it freed."""
    return int(mm.free_pins(nbytes, evict_active=pool == "prompt") or 0)
