"""Shared set-up of the comfyui suites: the stand-in ComfyUI on sys.path,
the library located, the package loaded the way ComfyUI loads a custom
node, and a few test nodes."""
import logging
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(PKG)
sys.path[:0] = [os.path.join(HERE, "standin")]

import comfy.model_management  # noqa: E402
import comfy.utils  # noqa: E402
import comfyui_main  # noqa: E402
import execution  # noqa: E402
import faketorch  # noqa: E402
import nodes  # noqa: E402
from comfy.model_patcher import ModelPatcher  # noqa: E402

MiB = 1 << 20
OUTPUT = os.environ.get("OUTPUT") or os.path.join(ROOT, "build")


class LogCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def grep(self, s):
        return [line for line in self.lines if s in line]


LOG = LogCapture()
logging.getLogger().addHandler(LOG)
logging.getLogger().setLevel(logging.DEBUG)


def library():
    path = os.environ.get("RAMCACHE_LIB") or os.path.join(OUTPUT, "libramcache.so")
    return path if os.path.exists(path) else None


def require_library():
    """The library's path; fails loudly (not a skip) when it is not built."""
    path = library()
    if path is None:
        raise AssertionError(
            "libramcache is not built: run 'make' (build/libramcache.so) or set "
            "RAMCACHE_LIB; these tests need it and do not pass without it")
    os.environ["RAMCACHE_LIB"] = path
    return path


def load_package():
    return comfyui_main.load_custom_node(PKG)


_AGENT = []


def fake_agent(bridge):
    """The fake agent on this process's page (opened once per process)."""
    from fakeagent import FakeAgent
    assert bridge.page is not None, "no control page: " + str(bridge.disabled)
    if not _AGENT:
        _AGENT.append(FakeAgent(bridge.page.path))
    return _AGENT[0]


def outputs(w):
    return w.executor.caches.outputs


# ------------------------------------------------------------ test nodes

STEP_HOOK = []  # callables (node_id, step) run before each sampling step
SEEN = {}


class MakeTensor:
    FUNCTION = "run"
    RETURN_TYPES = ("TENSOR",)

    def run(self, mib, tag=""):
        t = faketorch.mib(mib)
        return (t,)


class MakeViewPair:
    """Two outputs sharing one storage: counted once."""
    FUNCTION = "run"
    RETURN_TYPES = ("TENSOR", "TENSOR")

    def run(self, mib, tag=""):
        t = faketorch.mib(mib)
        return (t, t.view(mib * 256 * 1024))


class LoadModel:
    FUNCTION = "run"
    RETURN_TYPES = ("MODEL",)

    def run(self, mib, tag=""):
        return (ModelPatcher(faketorch.Module(faketorch.mib(mib), faketorch.mib(1))),)


class CloneModel:
    """A LoRA loader's output as ComfyUI makes it: a patcher over the same
    model as its input's (the weights shared), with patches of its own."""
    FUNCTION = "run"
    RETURN_TYPES = ("MODEL",)

    def run(self, model, mib=1, tag=""):
        clone = ModelPatcher(model.model)
        clone.patches = {"lora": faketorch.mib(mib)}
        return (clone,)


class Sampler:
    """A long node: one progress step per step, the test's hooks first."""
    FUNCTION = "run"
    RETURN_TYPES = ("TENSOR",)

    def run(self, steps, model=None, latent=None, tag="", step_s=0.0):
        import comfy.memory_management as cmm
        SEEN["release_callback"] = cmm.extra_ram_release_callback
        SEEN["sampler_thread"] = threading.get_ident()
        pbar = comfy.utils.ProgressBar(steps)
        for i in range(steps):
            for fn in list(STEP_HOOK):
                fn(i)
            if step_s:
                time.sleep(step_s)
            pbar.update(1)
        SEEN["sampler_end_ns"] = time.monotonic_ns()
        return (faketorch.mib(1),)


CALLS = {}  # tag -> callable, run by a Call node (a node with no progress bar)


class Call:
    FUNCTION = "run"
    RETURN_TYPES = ("ANY",)

    def run(self, tag, value=None, after=None):
        return (CALLS[tag](),)


class Expand:
    """Graph expansion: a tensor and a sampler reading it, as children."""
    FUNCTION = "run"
    RETURN_TYPES = ("TENSOR", "TENSOR")

    def run(self, mib, steps=3, tag=""):
        return {"expand": {
            "x1": node("MakeTensor", mib=mib, tag="child" + tag),
            "x2": node("Sampler", steps=steps, latent=["x1", 0], tag="child" + tag)},
            "result": (["x2", 0], ["x1", 0])}


RAN = []  # node ids of Record nodes, in the order they ran


class Record:
    """A pass-through that notes each time it really runs (not from cache)."""
    FUNCTION = "run"
    RETURN_TYPES = ("ANY",)

    def run(self, value, name=""):
        RAN.append(name)
        return (value,)


class Sink:
    FUNCTION = "run"
    OUTPUT_NODE = True
    RETURN_TYPES = ()

    def run(self, value, other=None):
        return {"ui": {"seen": [1]}, "result": ()}


nodes.NODE_CLASS_MAPPINGS.update({
    "MakeTensor": MakeTensor, "MakeViewPair": MakeViewPair,
    "LoadModel": LoadModel, "CloneModel": CloneModel, "Sampler": Sampler, "Sink": Sink, "Call": Call,
    "Expand": Expand, "Record": Record,
})


def node(cls, **inputs):
    return {"class_type": cls, "inputs": inputs}


def worker(cache_type="RAM_PRESSURE", ram=0.0, ram_inactive=0.0):
    server = comfyui_main.Server()
    comfyui_main.hijack_progress(server)
    args = {"lru": 100 if cache_type == "LRU" else 0, "ram": ram}
    if ram_inactive is not None:  # None: a ComfyUI with one --cache-ram value
        args["ram_inactive"] = ram_inactive
    return comfyui_main.Worker(server, getattr(execution.CacheType, cache_type), args)

