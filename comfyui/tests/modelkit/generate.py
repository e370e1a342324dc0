"""Model files for real ComfyUI on CPU, offline: SD1.5-layout checkpoints,
a CLIP-L text encoder, a VAE, a bare UNet and LoRAs, with random weights,
built from ComfyUI's own model classes (imported from a tree, so the keys
and shapes are the ones that tree's loaders expect) and written with the
stand-in safetensors writer, fp16.

Every tensor's values come from a seed of its own (file seed, part, key),
so a file is the same on every run and machine; checkpoint A's UNet, text
encoder and VAE are also the bare unet-a, clip-l and vae files, so the
split-loader prompt computes what checkpoint A's does; checkpoints A, B, C
differ in every weight.

Sizes: "full" is SD1.5's UNet (320 channels, channel_mult [1, 2, 4, 4], 2
res blocks, attention at the first three levels and in the middle);
"small" is the smallest UNet ComfyUI's model detection still takes as SD15
(comfy/model_detection.py: 320 base channels and a 768-wide cross-attention
are SD15's fixed unet_config; one level, one res block with one
transformer, whose cross-attention gives the context width, no middle
block, output blocks without attention). CLIP-L and the VAE are fixed by
SD15 (comfy/sd1_clip_config.json, the SD VAE config in comfy/sd.py), so
they make most of a small checkpoint.

Files go to DIR/<size>-g<GENERATOR>/ (default DIR /var/tmp/ramcache-models),
each written to a temporary name and renamed, under a per-file fcntl lock,
and skipped when present with the size its layout gives.

    cd comfyui/tests && /usr/bin/python3 -m modelkit.generate \
        --tree /var/tmp/ramcache-comfyui-0.33.0 --size small --what all
                                         # prints JSON: files, bytes, seconds

ComfyUI's modules are imported from the tree as a ComfyUI process started
by realcomfy.py imports them: the tree first on PYTHONPATH. Run without it
there, the command runs itself again with it (command()).
"""
import argparse
import contextlib
import fcntl
import importlib
import json
import math
import os
import subprocess
import sys
import time
import types
import zlib

from rctest import py_env

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
GENERATOR = 1  # bump when the files' contents change
DEFAULT_DIR = "/var/tmp/ramcache-models"
CHECKPOINTS = {"a": 1, "b": 2, "c": 3}  # name: seed
LORAS = {"1": (101, 16), "2": (102, 8)}  # name: (seed, rank)
# SD's VAE (comfy/sd.py's default when a VAE state dict has no other marks).
VAE_DDCONFIG = {"double_z": True, "z_channels": 4, "resolution": 256, "in_channels": 3,
                "out_ch": 3, "ch": 128, "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2,
                "attn_resolutions": [], "dropout": 0.0}
# What comfy/model_detection.py reads from an SD1.5 UNet's state dict.
UNET_SHAPES = {
    "full": {"num_res_blocks": [2, 2, 2, 2], "channel_mult": [1, 2, 4, 4],
             "transformer_depth": [1, 1, 1, 1, 1, 1, 0, 0],
             "transformer_depth_output": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
             "transformer_depth_middle": 1},
    "small": {"num_res_blocks": [1], "channel_mult": [1], "transformer_depth": [1],
              "transformer_depth_output": [0, 0], "transformer_depth_middle": -2},
}
UNET_FIXED = {"use_checkpoint": False, "image_size": 32, "use_spatial_transformer": True,
              "legacy": False, "adm_in_channels": None, "in_channels": 4, "out_channels": 4,
              "model_channels": 320, "use_linear_in_transformer": False, "context_dim": 768,
              "use_temporal_resblock": False, "use_temporal_attention": False}


# ------------------------------------------------------------ ComfyUI

RUNS_MAIN = "\nd = sys.argv[1]\n"  # where realcomfy's BOOT turns to running main.py


def comfy_env(tree):
    """ComfyUI's modules of @tree (first on this process's PYTHONPATH: see
    command()), imported in this process set up as realcomfy.py sets up a
    ComfyUI process (its BOOT script, with the stand-ins and torch shims in
    it as boot.with_modelkit puts them, up to where it runs main.py), on
    CPU."""
    import realcomfy
    from modelkit import boot
    text = boot.with_modelkit(realcomfy.BOOT).format(
        stubs=realcomfy.STUBS, force=realcomfy.too_old(tree),
        aliases=realcomfy.TORCH_ALIASES, control="none")
    if RUNS_MAIN not in text:
        raise RuntimeError("realcomfy's BOOT no longer has the line " + RUNS_MAIN.strip())
    head = text.split(RUNS_MAIN)[0]
    with contextlib.redirect_stdout(sys.stderr):
        exec(compile(head, "<realcomfy BOOT>", "exec"), {"__name__": "ramcache_generate_boot"})
    importlib.import_module("comfy.cli_args").args.cpu = True  # as main.py --cpu
    names = {"supported_models": "comfy.supported_models", "detection": "comfy.model_detection",
             "utils": "comfy.utils", "sd1_clip": "comfy.sd1_clip", "ops": "comfy.ops",
             "autoencoder": "comfy.ldm.models.autoencoder", "lora": "comfy.lora",
             "openaimodel": "comfy.ldm.modules.diffusionmodules.openaimodel"}
    return types.SimpleNamespace(**{k: importlib.import_module(v) for k, v in names.items()})


def unet_config(comfy, size):
    """The SD15 UNet config of @size, with SD15's own extra settings."""
    cfg = dict(UNET_FIXED, **UNET_SHAPES[size])
    return comfy.supported_models.SD15(cfg).unet_config


def skeletons(comfy, size):
    """{part: {key: shape}} of ComfyUI's own UNet, CLIP-L text
    model and VAE (built with ComfyUI's non-initialising ops: no weights
    are computed), after checking that ComfyUI detects the UNet as SD15."""
    import torch
    cfg = unet_config(comfy, size)
    unet = comfy.openaimodel.UNetModel(**cfg, dtype=torch.float16, device="cpu",
                                       operations=comfy.ops.disable_weight_init)
    check_sd15(comfy, unet.state_dict(), cfg)
    clip = comfy.sd1_clip.SDClipModel(device="cpu", dtype=torch.float16).transformer
    vae = comfy.autoencoder.AutoencoderKL(ddconfig=VAE_DDCONFIG, embed_dim=4)
    return {part: {k: tuple(v.shape) for k, v in m.state_dict().items()}
            for part, m in (("unet", unet), ("clip", clip), ("vae", vae))}, cfg


def check_sd15(comfy, unet_sd, cfg):
    """ComfyUI's detection takes this UNet as SD15 with this config."""
    prefix = "model.diffusion_model."
    sd = {prefix + k: v for k, v in unet_sd.items()}
    found = comfy.detection.model_config_from_unet(sd, prefix)
    if type(found).__name__ != "SD15":
        raise RuntimeError(f"ComfyUI detects {type(found).__name__}, not SD15, for {cfg}")
    wrong = {k: (v, cfg.get(k)) for k, v in found.unet_config.items() if cfg.get(k) != v}
    if wrong:
        raise RuntimeError(f"ComfyUI detects another SD15 config: {wrong}")


# ------------------------------------------------------------ weights

def fill(shape, seed_text, scale=1.0):
    """Deterministic fp16 values for one tensor: matrices and convolutions
    N(0, (scale^2)/fan_in) (activations keep their scale through the
    network), norm scales 1 + N(0, 0.02^2), biases N(0, 0.02^2)."""
    import torch
    g = torch.Generator().manual_seed(zlib.crc32(seed_text.encode()))
    t = torch.randn(shape, generator=g)
    if len(shape) >= 2:
        t.mul_(scale / math.sqrt(math.prod(shape[1:])))
    elif seed_text.endswith(".weight"):
        t.mul_(0.02).add_(1.0)
    else:
        t.mul_(0.02)
    return t.half()


def shape_only(shape, seed_text, scale=1.0):
    """A stand-in for fill's result with its shape and dtype but no memory
    (one element seen through a zero-stride view): enough to lay a file
    out and know its size without computing its values."""
    import torch
    return torch.empty((), dtype=torch.float16).expand(shape)


# Each part's keys in an SD1.5 checkpoint: (prefix, keys left out).
CHECKPOINT_PARTS = {"unet": ("model.diffusion_model.", ()),
                    "clip": ("cond_stage_model.transformer.", ("text_projection.weight",)),
                    "vae": ("first_stage_model.", ())}


def part_tensors(values, shapes, part, seed, prefix="", skip=()):
    """{prefix + key: values(shape, seed text)} of one part, seeded by
    (seed, part, key)."""
    return {prefix + k: values(shape, f"{seed}/{part}/{k}")
            for k, shape in shapes[part].items() if k not in skip}


def checkpoint_tensors(values, shapes, seed):
    out = {}
    for part, (prefix, skip) in CHECKPOINT_PARTS.items():
        out.update(part_tensors(values, shapes, part, seed, prefix, skip))
    return out


def lora_targets(comfy, cfg, shapes):
    """[(LoRA key, weight shape)]: the UNet's attention projections under
    kohya's diffusers names (comfy/lora.py maps them back through
    comfy.utils.unet_to_diffusers) and CLIP-L's attention and MLP layers."""
    unet = shapes["unet"]
    out = []
    for dk, uk in sorted(comfy.utils.unet_to_diffusers(cfg).items()):
        if ".attentions." in dk and dk.endswith(".weight") and len(unet.get(uk, ())) >= 2:
            out.append(("lora_unet_" + dk[:-len(".weight")].replace(".", "_"), unet[uk]))
    clip = shapes["clip"]
    for i in range(12):
        for name, short in sorted(comfy.lora.LORA_CLIP_MAP.items()):
            key = f"text_model.encoder.layers.{i}.{name}.weight"
            if key in clip:
                out.append((f"lora_te_text_model_encoder_layers_{i}_{short}", clip[key]))
    return out


def lora_tensors(values, comfy, cfg, shapes, seed, rank):
    """A kohya-format LoRA (lora_down, lora_up, alpha = rank) over
    lora_targets; the update's scale is about half the weights'."""
    import torch
    out = {}
    for key, shape in lora_targets(comfy, cfg, shapes):
        out_dim, in_dim, kernel = shape[0], shape[1], tuple(shape[2:])
        out[key + ".lora_down.weight"] = values((rank, in_dim, *kernel), f"{seed}/lora/{key}.down")
        out[key + ".lora_up.weight"] = values((out_dim, rank, *kernel),
                                              f"{seed}/lora/{key}.up", 0.5)
        out[key + ".alpha"] = torch.tensor(float(rank), dtype=torch.float16)
    return out


# ------------------------------------------------------------- files

def file_specs(size):
    """{id: (file name, kind, tensors(values, comfy, cfg, shapes))}, values
    being fill or shape_only."""
    specs = {}
    for name, seed in CHECKPOINTS.items():
        specs[f"ckpt-{name}"] = (f"modelkit-sd15-{size}-{name}.safetensors", "checkpoint",
                                 lambda v, c, cfg, sh, seed=seed: checkpoint_tensors(v, sh, seed))
    a = CHECKPOINTS["a"]
    specs["unet-a"] = (f"modelkit-sd15-{size}-unet-a.safetensors", "unet",
                       lambda v, c, cfg, sh: part_tensors(v, sh, "unet", a))
    specs["clip-l"] = ("modelkit-clip-l-a.safetensors", "text_encoder",
                       lambda v, c, cfg, sh: part_tensors(v, sh, "clip", a))
    specs["vae"] = ("modelkit-vae-a.safetensors", "vae",
                    lambda v, c, cfg, sh: part_tensors(v, sh, "vae", a))
    for name, (seed, rank) in LORAS.items():
        specs[f"lora-{name}"] = (f"modelkit-sd15-{size}-lora-{name}.safetensors", "lora",
                                 lambda v, c, cfg, sh, seed=seed, rank=rank:
                                 lora_tensors(v, c, cfg, sh, seed, rank))
    return specs


def selected(size, what):
    """The file ids @what names: "checkpoints", "all", or ids joined by
    commas (ckpt-a, ckpt-b, ckpt-c, unet-a, clip-l, vae, lora-1, lora-2)."""
    ids = list(file_specs(size))
    if what == "all":
        return ids
    if what == "checkpoints":
        return [i for i in ids if i.startswith("ckpt-")]
    picked = [w.strip() for w in what.split(",") if w.strip()]
    unknown = [p for p in picked if p not in ids]
    if unknown:
        raise SystemExit(f"unknown file ids {unknown}; known: {ids}")
    return picked


def file_bytes(tensors):
    """The size of the safetensors file of @tensors."""
    from safetensors.torch import _layout
    header, _ = _layout(tensors, None)
    return 8 + len(header) + sum(t.numel() * t.element_size() for t in tensors.values())


def build(path, make):
    """Write @path from make(fill) unless it is there with the size
    make(shape_only) lays out: under an fcntl lock (.locks/NAME beside
    it), into a temporary file renamed into place. (bytes, seconds, built)."""
    from safetensors.torch import save_file
    t0 = time.monotonic()
    locks = os.path.join(os.path.dirname(path), ".locks")
    os.makedirs(locks, exist_ok=True)
    with open(os.path.join(locks, os.path.basename(path)), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        size = file_bytes(make(shape_only))
        if os.path.isfile(path) and os.path.getsize(path) == size:
            return size, round(time.monotonic() - t0, 2), False
        tmp = f"{path}.tmp.{os.getpid()}"
        try:
            save_file(make(fill), tmp)
            os.rename(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return size, round(time.monotonic() - t0, 2), True


def generate(tree, out, size, what):
    """Build the files @what names for @size under @out; the JSON report."""
    t0 = time.monotonic()
    folder = os.path.join(out, f"{size}-g{GENERATOR}")
    if os.path.realpath(folder).startswith(os.path.realpath(os.path.dirname(TESTS))):
        raise SystemExit(f"refusing to write model files inside the repository: {folder}")
    os.makedirs(folder, exist_ok=True)
    comfy = comfy_env(tree)
    shapes, cfg = skeletons(comfy, size)
    specs = file_specs(size)
    files = []
    for fid in selected(size, what):
        name, kind, make = specs[fid]
        path = os.path.join(folder, name)
        nbytes, secs, built = build(path, lambda values: make(values, comfy, cfg, shapes))
        files.append({"id": fid, "kind": kind, "name": name, "path": path, "bytes": nbytes,
                      "seconds": secs, "built": built})
    return {"generator": GENERATOR, "size": size, "dir": folder, "tree": tree,
            "unet_config": {k: cfg[k] for k in UNET_SHAPES[size]}, "files": files,
            "seconds": round(time.monotonic() - t0, 2)}


def command(tree, out, size, what, python):
    """(argv, environment) of this module's command line run by @python on
    @tree, which comes first on its PYTHONPATH (as realcomfy.py starts
    ComfyUI), this folder's parent (realcomfy, modelkit) after it."""
    argv = [python, "-m", "modelkit.generate", "--tree", os.path.abspath(tree),
            "--out", os.path.abspath(out), "--size", size, "--what", what]
    env = py_env(os.path.abspath(tree), TESTS,
                 base=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    return argv, env


def ensure(tree, size="small", what="all", out=DEFAULT_DIR, python="/usr/bin/python3",
           timeout=3600):
    """generate() run by @python (Debian's, with torch) in a process of its
    own, from any interpreter: the JSON report as a dict."""
    argv, env = command(tree, out, size, what, python)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=TESTS)
    if p.returncode != 0:
        raise RuntimeError(f"generate.py failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout)


def main(argv=None):
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, help="an unpacked ComfyUI tree")
    ap.add_argument("--out", default=DEFAULT_DIR, help="scratch folder (default %(default)s)")
    ap.add_argument("--size", choices=sorted(UNET_SHAPES), default="small")
    ap.add_argument("--what", default="all",
                    help="checkpoints, all, or file ids joined by commas (default %(default)s)")
    args = ap.parse_args(argv)
    tree = os.path.abspath(args.tree)
    if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != tree:
        # run by hand: again, the tree first on PYTHONPATH
        argv, env = command(tree, args.out, args.size, args.what, sys.executable)
        os.execve(argv[0], argv, env)
    report = generate(tree, os.path.abspath(args.out), args.size, args.what)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
