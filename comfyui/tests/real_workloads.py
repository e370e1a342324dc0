"""The workloads run in real ComfyUI (real_comfyui.py), as API prompts of
ComfyUI's core nodes (and two test nodes of realnodes/). Pure: prompts
and what a perfect cache would do with them, no ComfyUI needed.

session()   the reuse session: 20 prompts of four workflows on 2048x2048
            images (Blur, Sharpen, Invert, lanczos and bicubic ScaleBy,
            Blend), alternated as a user iterates (A B A' C B' A D C' D'
            A'' ...), sharing expensive upstream nodes
ten()       ten prompts EmptyImage -> ImageInvert -> ImageScale -> Preview,
            each caching ~384 MiB
long_node() a prompt caching ~384 MiB, then prompts whose first node (a
            test node) grows RAM by 1 GiB for ~10 s reporting steps
            through ProgressBar
batch()     a prompt caching ~384 MiB, then ImageScaleBy lanczos of a
            batch of 16 1024x1024 images (one call, no progress hook)
models()    a user switching between three checkpoints and two LoRAs
            (modelkit's generated files), re-running prompts with a new
            seed: ten prompts CheckpointLoaderSimple [-> LoraLoader] ->
            CLIPTextEncode -> KSampler (64x64, 1 step) -> VAEDecode
switch()    three checkpoints loaded in turn, then the first again with a
            new seed (make test's model check: a limit holding two)
The model cases name their files by size (MODEL_CASES: "small" for the
tests, "full" for the benchmark); the runner generates them.
"""
import json

from modelkit import workflow

SIDE = 2048
THUMB = 1 / 32  # the preview is of a thumbnail: PNG encoding stays cheap


class Graph:
    """An API prompt built node by node; ids are assigned in order."""

    def __init__(self):
        self.nodes = {}

    def add(self, cls, **inputs):
        nid = str(len(self.nodes) + 1)
        self.nodes[nid] = {"class_type": cls, "inputs": inputs}
        return [nid, 0]

    def preview(self, image, scale=THUMB, method="nearest-exact"):
        t = self.add("ImageScaleBy", image=image, upscale_method=method, scale_by=scale)
        self.add("PreviewImage", images=t)
        return self.nodes


def _src(g, colour):
    return g.add("EmptyImage", width=SIDE, height=SIDE, batch_size=1, color=colour)


def _blur(g, image):
    return g.add("ImageBlur", image=image, blur_radius=2, sigma=1.0)


def _sharpen(g, image):
    return g.add("ImageSharpen", image=image, sharpen_radius=1, sigma=1.0, alpha=1.0)


def _scale(g, image, method, by):
    return g.add("ImageScaleBy", image=image, upscale_method=method, scale_by=by)


def _blend(g, a, b, factor, mode="normal"):
    return g.add("ImageBlend", image1=a, image2=b, blend_factor=factor, blend_mode=mode)


GREY, TEAL = 0x808080, 0x406080


def workflow_a(v):
    """A: grey -> blur -> lanczos x1.75 -> blend with grey (v) -> preview."""
    g = Graph()
    src = _src(g, GREY)
    big = _scale(g, _blur(g, src), "lanczos", 1.75)
    return g.preview(_blend(g, big, src, (0.2, 0.5, 0.8)[v]))


def workflow_b(v):
    """B: teal -> sharpen -> bicubic x1.25 -> invert -> preview of (v)."""
    g = Graph()
    up = _scale(g, _sharpen(g, _src(g, TEAL)), "bicubic", 1.25)
    return g.preview(g.add("ImageInvert", image=up), (THUMB, 1.5 * THUMB, 2 * THUMB)[v])


def workflow_c(v):
    """C: blend (v) of A's blur and B's sharpen -> bicubic preview."""
    g = Graph()
    mix = _blend(g, _blur(g, _src(g, GREY)), _sharpen(g, _src(g, TEAL)),
                 (0.3, 0.6, 0.45)[v], "screen")
    return g.preview(mix, method="bicubic")


def workflow_d(v):
    """D: B's sharpen -> blur -> lanczos (v) -> preview."""
    g = Graph()
    soft = _blur(g, _sharpen(g, _src(g, TEAL)))
    return g.preview(_scale(g, soft, "lanczos", (1.5, 1.25, 1.4)[v]))


WORKFLOWS = {"A": workflow_a, "B": workflow_b, "C": workflow_c, "D": workflow_d}
# A B A' C B' A D C' D' A'' ...: the order a user iterates in
SESSION = ["A0", "B0", "A1", "C0", "B1", "A0", "D0", "C1", "D1", "A2",
           "B0", "C0", "D0", "A1", "B1", "C1", "D1", "A0", "B2", "C2"]


def session():
    """[(name, prompt)] of the reuse session."""
    return [(n, WORKFLOWS[n[0]](int(n[1]))) for n in SESSION]


def ten(side=1024, batch=16):
    """[(name, prompt)]: ten prompts EmptyImage(side, batch, colour i) ->
    ImageInvert -> ImageScale (to side/8) -> PreviewImage; each caches two
    side x side x batch float images (384 MiB at the defaults)."""
    out = []
    for i in range(10):
        g = Graph()
        img = g.add("EmptyImage", width=side, height=side, batch_size=batch, color=i + 1)
        inv = g.add("ImageInvert", image=img)
        small = g.add("ImageScale", image=inv, upscale_method="nearest-exact",
                      width=side // 8, height=side // 8, crop="disabled")
        g.add("PreviewImage", images=small)
        out.append((f"p{i}", g.nodes))
    return out


def _cached_prompt(colour, side=1024, batch=16):
    """One prompt whose outputs (two side x side x batch images) stay cached."""
    g = Graph()
    inv = g.add("ImageInvert", image=g.add(
        "EmptyImage", width=side, height=side, batch_size=batch, color=colour))
    g.add("PreviewImage", images=g.add("ImageScale", image=inv, upscale_method="nearest-exact",
                                       width=side // 8, height=side // 8, crop="disabled"))
    return g.nodes


def long_node(grow_mib=1024, seconds=10.0, prompts=3):
    """[(name, prompt)]: a prompt caching ~384 MiB, then @prompts prompts
    whose first node (RAMCacheTestGrow) grows RAM by @grow_mib over
    @seconds in ProgressBar steps (freed when it ends), each after another
    cached prompt: in 1.5 GiB the node finishes only if earlier outputs
    go while it runs (ComfyUI's own checks run between nodes)."""
    out = [("cache0", _cached_prompt(101))]
    for i in range(prompts):
        g = Graph()
        grown = g.add("RAMCacheTestGrow", mib=grow_mib, seconds=seconds, steps=20, seed=i)
        g.add("PreviewImage", images=grown)
        out.append((f"grow{i}", g.nodes))
        out.append((f"cache{i + 1}", _cached_prompt(102 + i)))
    return out


def batch(images=16, side=1024, scale=1.5):
    """[(name, prompt)]: a prompt caching ~384 MiB, then ImageScaleBy
    lanczos of @images side x side images in one call (PIL per image, no
    progress hook). Its peak is ~66 MiB per image (the input, the list of
    float results and their stack): at the defaults ~1.3 GiB with ComfyUI's
    idle usage, which fits in 1.5 GiB only once the earlier output is gone."""
    g = Graph()
    img = g.add("EmptyImage", width=side, height=side, batch_size=images, color=77)
    up = g.add("ImageScaleBy", image=img, upscale_method="lanczos", scale_by=scale)
    g.preview(up)
    return [("cache0", _cached_prompt(55)), ("lanczos", g.nodes)]


def ckpt(size, name):
    return f"modelkit-sd15-{size}-{name}.safetensors"


def lora(size, n):
    return f"modelkit-sd15-{size}-lora-{n}.safetensors"


def _model_prompt(size, spec):
    """A prompt of @spec "A", "A+1", "B+2@3" (checkpoint, LoRA, seed)."""
    head, _, seed = spec.partition("@")
    name, _, lo = head.partition("+")
    return workflow.checkpoint_prompt(ckpt(size, name.lower()), lo and lora(size, lo),
                                      seed=int(seed or 1), negative=None)


# A B A+1 C A' B+2 A+1' C' B' A'': the order a user switches in
MODEL_SESSION = ["A", "B", "A+1", "C", "A@2", "B+2", "A+1@2", "C@2", "B@2", "A@3"]
SWITCH = ["A", "B", "C", "A@2"]


def models(size="small"):
    """[(name, prompt)] of the model session."""
    return [(s, _model_prompt(size, s)) for s in MODEL_SESSION]


def switch(size="small"):
    return [(s, _model_prompt(size, s)) for s in SWITCH]


LOADERS = ("CheckpointLoaderSimple", "LoraLoader", "CLIPLoader", "VAELoader", "UNETLoader")
WORKLOADS = {"session": session, "ten": ten, "long": long_node, "batch": batch,
             "models": models, "switch": switch,
             "models-full": lambda: models("full"), "switch-full": lambda: switch("full")}
# the model cases and the size of the files they load
MODEL_CASES = {"models": "small", "switch": "small", "models-full": "full",
               "switch-full": "full"}


def signature(prompt, nid, memo=None):
    """A node's cache key as ComfyUI forms it: its class and inputs, with
    links replaced by the signature of the node they come from."""
    memo = {} if memo is None else memo
    if nid not in memo:
        node = prompt[nid]
        ins = {k: (signature(prompt, v[0], memo), v[1]) if isinstance(v, list) else v
               for k, v in sorted(node["inputs"].items())}
        memo[nid] = json.dumps([node["class_type"], ins], sort_keys=True)
    return memo[nid]


def perfect_cache(prompts):
    """(nodes, executions) of @prompts with a cache that keeps everything:
    the most hits any cache can have (nodes - executions)."""
    seen, nodes = set(), 0
    for _, p in prompts:
        memo = {}
        for nid in p:
            nodes += 1
            seen.add(signature(p, nid, memo))
    return nodes, len(seen)
