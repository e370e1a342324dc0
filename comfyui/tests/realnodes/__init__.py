"""Test nodes for the runs in real ComfyUI (comfyui/tests/real_comfyui.py),
loaded from a scratch custom_nodes folder with and without the package.

RAMCacheTestGrow stands for a long node such as a sampler: it grows RAM by
`mib` over `seconds`, in `steps` steps reported through ComfyUI's own
ProgressBar (where ComfyUI and the package have their per-step hooks), and
frees it when it ends; its output is its input image (a small one of
its own without one: then it is the prompt's first node, and ComfyUI's
own RAM checks, which run between nodes, do not run before it).
"""
import time

import torch

import comfy.utils


class RAMCacheTestGrow:
    CATEGORY = "testing"
    FUNCTION = "run"
    RETURN_TYPES = ("IMAGE",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "mib": ("INT", {"default": 512, "min": 0, "max": 1 << 20}),
            "seconds": ("FLOAT", {"default": 10.0, "min": 0.0, "max": 600.0}),
            "steps": ("INT", {"default": 20, "min": 1, "max": 10000}),
            "seed": ("INT", {"default": 0, "min": 0, "max": 1 << 30}),
        }, "optional": {"image": ("IMAGE",)}}

    def run(self, mib, seconds, steps, seed, image=None):
        pbar = comfy.utils.ProgressBar(steps)
        held = []
        per = (mib << 20) // steps // 4  # float32 elements per step
        for _ in range(steps):
            held.append(torch.ones(per))  # touched: resident at once
            time.sleep(seconds / steps)
            pbar.update(1)
        del held
        if image is None:
            image = torch.full((1, 64, 64, 3), (seed % 100) / 100.0)
        return (image.clone(),)


NODE_CLASS_MAPPINGS = {"RAMCacheTestGrow": RAMCacheTestGrow}
