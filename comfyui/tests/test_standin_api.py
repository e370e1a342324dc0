#!/usr/bin/env python3
"""The stand-in has every part of ComfyUI the package relies on
(comfyui_api.ITEMS, read with ast), with execution.execute's parameters in
upstream's order; real_comfyui.py runs the same comparison against a real
checkout, so a name the real versions have and the stand-in lacks is
caught."""
import os
import re
import shutil
import tempfile

import env
from rctest import main, test

import comfyui_api as API

STANDIN = os.path.join(env.HERE, "standin")


@test
def standin_has_every_part_the_package_uses():
    have, execute_ok, params = API.inventory(STANDIN)
    missing = [k for k, ok in have.items() if not ok]
    assert not missing, missing
    assert execute_ok, params


@test
def a_part_missing_from_the_standin_is_caught():
    tmp = tempfile.mkdtemp(prefix="ramcache-standin-")
    try:
        copy = os.path.join(tmp, "standin")
        shutil.copytree(STANDIN, copy)
        mm = os.path.join(copy, "comfy", "model_management.py")
        src = open(mm).read()
        open(mm, "w").write(re.sub(r"def load_models_gpu", "def load_models_gpu_renamed", src))
        problems = API.compare(STANDIN, copy, "two-value --cache-ram")
        assert problems == ["the stand-in lacks comfy/model_management.py: load_models_gpu"], \
            problems
        # and a real checkout without a part its version must have
        problems = API.compare(copy, STANDIN, "two-value --cache-ram")
        assert problems == ["real ComfyUI lacks comfy/model_management.py: load_models_gpu"], \
            problems
        # older versions need not have the newest parts
        os.remove(os.path.join(copy, "comfy", "memory_management.py"))
        open(mm, "w").write(src)
        assert API.compare(copy, STANDIN, "one-value --cache-ram") == []
        assert API.compare(copy, STANDIN, "two-value --cache-ram") == [
            "real ComfyUI lacks comfy/memory_management.py: extra_ram_release",
            "real ComfyUI lacks comfy/memory_management.py: set_ram_cache_release_state"]
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
