#!/usr/bin/env python3
"""Byte counting of cached outputs: CPU tensors once per storage, model
patchers as their model's CPU weights, GPU tensors not at all."""
import env  # noqa: F401  (stand-in on sys.path)
from env import MiB
from rctest import main, test

import faketorch
from comfy.model_patcher import ModelPatcher
import execution
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "rc_sizing", os.path.join(env.PKG, "sizing.py"))
sizing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sizing)


def size(entry):
    """(bytes, has_model, plain) of @entry."""
    return sizing.entry_sizing(entry)[:3]


@test
def counts_a_storage_once():
    t = faketorch.mib(4)
    v = t.view(4 * 256 * 1024)
    entry = execution.CacheEntry({}, [[t], [v], [[t, v]]])
    assert size(entry) == (4 * MiB, False, True)


@test
def ignores_gpu_tensors():
    entry = execution.CacheEntry({}, [[faketorch.mib(2)], [faketorch.mib(8, "cuda")]])
    assert size(entry)[0] == 2 * MiB


@test
def counts_a_model_patcher_as_its_cpu_weights():
    shared = faketorch.mib(2)
    m = ModelPatcher(faketorch.Module(faketorch.mib(3), shared, shared.view(1),
                                      faketorch.mib(5, "cuda")))
    n, has_model, plain = size(execution.CacheEntry({}, [[m]]))
    assert n == 5 * MiB and has_model and not plain


@test
def counts_clip_and_vae_through_their_patcher():
    class VAE:
        def __init__(self):
            self.patcher = ModelPatcher(faketorch.Module(faketorch.mib(1)))
    n, has_model, plain = size(
        execution.CacheEntry({}, [[VAE()], [{"samples": faketorch.mib(1)}]]))
    assert n == 2 * MiB and has_model and not plain


@test
def survives_odd_outputs():
    loop = []
    loop.append(loop)
    entry = execution.CacheEntry({}, [[None], ["text"], [loop], [object()]])
    assert size(entry) == (0, False, False)  # object(): not plain


@test
def plain_is_what_frees_without_running_python_code():
    """Tensors, scalars, builtin containers and NamedTuples are plain; an
    object of any other class (a __del__, a weakref finalizer) is not."""
    latent = {"samples": faketorch.mib(1), "batch_index": [0, 1]}
    assert size(execution.CacheEntry({"images": [{"filename": "a.png"}]},
                                                  [[latent], [1.5, "x", None]]))[2]

    class Dict(dict):
        pass

    class Finalized:
        def __del__(self):
            pass
    for odd in (Dict(a=1), Finalized()):
        assert not size(execution.CacheEntry({}, [[odd]]))[2], odd
    assert not size(execution.CacheEntry({"x": [Finalized()]}, [[1]]))[2]



@test
def owned_bytes_counts_a_shared_storage_once_on_the_oldest_holder():
    owned, shares = sizing.owned_bytes({
        7: {"w1": 4, "w2": 6, "patch": 1},  # a LoRA clone of entry 3's model
        3: {"w1": 4, "w2": 6},  # the checkpoint's model
        9: {"img": 2}})
    assert owned == {3: 10, 7: 1, 9: 2}, owned
    assert shares == {3: [7]}, shares
    assert sum(owned.values()) == 13  # what the process holds


if __name__ == "__main__":
    main()
