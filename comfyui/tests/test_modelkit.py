#!/usr/bin/python3
"""The stand-ins and torch shims against what the real packages do:
safetensors' file layout, zero-copy private mapping and error names;
einops' results on the patterns ComfyUI uses; CLIP token ids known from
the real tokenizer; torch 2.x semantics of the shims. TAP output (rctest).
Needs Debian's python3 with torch (else every case skips); the tokenizer
case needs an unpacked ComfyUI tree (realcomfy.unpack)."""
import json
import os
import struct
import sys
import tempfile

from modelkit import boot
from rctest import Skip, main, test

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modelkit")
# these stand-ins, even beside real ones: boot's finder, serving them all
sys.meta_path.insert(0, boot.StandinFinder(boot.PROVIDES))

try:
    import torch
except ImportError:
    torch = None


def need_torch():
    if torch is None:
        raise Skip("no torch in this python (use /usr/bin/python3)")


def tmpfile(data=b""):
    """A scratch file holding @data; the caller removes it."""
    fd, path = tempfile.mkstemp(suffix=".safetensors", dir="/var/tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def sample():
    """Tensors of several dtypes and shapes, a scalar and an empty one."""
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(3, 5, generator=g), "h": torch.randn(7, generator=g).half(),
            "b": torch.randn(2, 2, generator=g).bfloat16(), "i": torch.arange(6).reshape(2, 3),
            "u": torch.arange(5, dtype=torch.uint8), "m": torch.tensor([True, False, True]),
            "s": torch.tensor(2.5), "e": torch.zeros(0, 4)}


@test
def safetensors_layout_is_the_real_writers():
    """ComfyUI and other readers expect the real layout byte for byte."""
    need_torch()
    from safetensors.torch import save_file
    path = tmpfile()
    try:
        save_file(sample(), path, metadata={"format": "pt"})
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            raw = f.read(n)
            rest = len(f.read())
        text = raw.decode()
        pad = len(text) - len(text.rstrip(" "))
        assert n % 8 == 0 and text.rstrip(" ").endswith("}") and pad < 8
        header = json.loads(raw)
        assert list(header)[0] == "__metadata__" and header["__metadata__"] == {"format": "pt"}
        names = [k for k in header if k != "__metadata__"]
        assert names == ["i", "e", "s", "w", "b", "h", "m", "u"], names  # 8, 4, 2, 1 bytes
        end = 0
        for k in names:
            start, stop = header[k]["data_offsets"]
            assert start == end
            end = stop
        assert end == rest and header["b"]["dtype"] == "BF16" and header["s"]["shape"] == []
    finally:
        os.unlink(path)


@test
def safetensors_round_trip_file_and_bytes():
    """Every dtype ComfyUI stores comes back equal, and resaving what was
    loaded writes the same file."""
    need_torch()
    from safetensors.torch import load, load_file, save, save_file
    path = tmpfile()
    try:
        save_file(sample(), path)
        for got in (load_file(path), load(save(sample()))):
            assert sorted(got) == sorted(sample())
            for k, v in sample().items():
                assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
                assert torch.equal(got[k], v), k
        save_file(load_file(path), path + ".2")  # views of one mapping are not "shared"
        assert open(path, "rb").read() == open(path + ".2", "rb").read()
    finally:
        os.unlink(path)
        if os.path.exists(path + ".2"):
            os.unlink(path + ".2")


@test
def safetensors_tensors_are_views_of_a_private_file_mapping():
    """Loading must fault pages in from the file as the real package does,
    not copy them into anonymous memory."""
    need_torch()
    from safetensors import safe_open
    from safetensors.torch import save_file
    path = tmpfile()
    try:
        save_file({"big": torch.ones(1 << 20), "small": torch.zeros(3)}, path)
        with safe_open(path, framework="pt") as f:
            base = f._storage.data_ptr()
            big, off = f.get_tensor("big"), f._offset
            assert big.data_ptr() == base + off + f._infos["big"]["data_offsets"][0]
            maps = [ln for ln in open("/proc/self/maps") if path in ln]
            assert maps and all(" rw-p " in ln or " r--p " in ln for ln in maps), maps
            assert float(big.sum()) == float(1 << 20)
        assert float(big[0]) == 1.0  # usable after the file is closed, as with the real one
    finally:
        os.unlink(path)


@test
def safetensors_errors_carry_the_real_names():
    """comfy/utils.py turns HeaderTooLarge and MetadataIncompleteBuffer
    into its own messages by matching these names."""
    need_torch()
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import save_file
    good = tmpfile()
    save_file({"x": torch.ones(4)}, good)
    data = open(good, "rb").read()
    os.unlink(good)
    cases = {"HeaderTooLarge": struct.pack("<Q", 200_000_000) + b"{}",
             "MetadataIncompleteBuffer": data[:-4], "HeaderTooSmall": b"123",
             "InvalidHeaderDeserialization": struct.pack("<Q", 8) + b"{nojson}"}
    for name, blob in cases.items():
        path = tmpfile(blob)
        try:
            safe_open(path, framework="pt")
            raise AssertionError(f"no error for {name}")
        except SafetensorError as e:
            assert name in str(e), (name, str(e))
        finally:
            os.unlink(path)


@test
def einops_matches_torch_on_comfyui_patterns():
    """The UNet, attention and VAE patterns ComfyUI runs give what plain
    torch reshapes give; patterns einops refuses are refused."""
    need_torch()
    from einops import EinopsError, rearrange, reduce, repeat
    from einops.layers.torch import Rearrange
    x, z, img = torch.randn(2, 6, 4), torch.randn(2, 3, 4, 5), torch.randn(1, 4, 8, 8)
    assert torch.equal(rearrange(x, "b n d -> b d n"), x.permute(0, 2, 1))
    assert torch.equal(rearrange(x, "b (h w) c -> b c h w", h=2),
                       x.reshape(2, 2, 3, 4).permute(0, 3, 1, 2))
    assert torch.equal(rearrange(z, "b ... -> b (...)"), z.reshape(2, 60))
    p = rearrange(img, "b c (h ph) (w pw) -> b (h w) (c ph pw)", ph=2, pw=2)
    assert torch.equal(p, img.reshape(1, 4, 4, 2, 4, 2).permute(0, 2, 4, 1, 3, 5)
                       .reshape(1, 16, 16))
    assert torch.equal(rearrange(p, "b (h w) (c ph pw) -> b c (h ph) (w pw)", h=4, ph=2, pw=2), img)
    m = repeat(torch.arange(10.).reshape(2, 5), "b j -> (b h) () j", h=3)
    assert m.shape == (6, 1, 5) and torch.equal(m[2, 0], torch.arange(5.))
    assert torch.equal(m[3, 0], torch.arange(5., 10.))
    t = torch.arange(3.)
    assert torch.equal(repeat(t, "b -> b d", d=4), t[:, None].expand(3, 4))
    assert repeat(torch.tensor([1.]), "1 -> b () t () ()", t=3, b=2).shape == (2, 1, 3, 1, 1)
    heads = rearrange(torch.randn(2, 8, 10, 6), "b ... (h d) -> b ... h d", h=2)
    assert heads.shape == (2, 8, 10, 2, 3)
    assert rearrange(torch.randn(3), "... -> ... 1").shape == (3, 1)
    assert torch.equal(reduce(z, "b c h w -> b c", "mean"), z.mean(dim=(2, 3)))
    assert torch.equal(reduce(z, "b c (h 2) w -> b c h w", "max"),
                       z.reshape(2, 3, 2, 2, 5).amax(dim=3))
    assert torch.equal(reduce(z, "b ... -> b", "sum"), z.sum(dim=(1, 2, 3)))
    assert Rearrange("b c h w -> b (h w) c")(img).shape == (1, 64, 4)
    for bad in ["b c -> b", "b c -> b c d", "(b t) c -> b t c", "b c d -> b c", "b b -> b b"]:
        try:
            rearrange(torch.randn(4, 5), bad)
            raise AssertionError(f"no error for {bad}")
        except EinopsError:
            pass


@test
def clip_tokenizer_gives_the_real_ids():
    """Token ids as transformers' CLIPTokenizer gives them, so prompts
    encode as they do for real users."""
    need_torch()
    import realcomfy
    trees = [realcomfy.tree_path(v) for v in realcomfy.VERSIONS]
    folder = next((os.path.join(t, "comfy", "sd1_tokenizer") for t in trees
                   if os.path.isdir(os.path.join(t, "comfy", "sd1_tokenizer"))), None)
    if folder is None:
        raise Skip("no unpacked ComfyUI tree")
    from transformers import CLIPTokenizer
    tok = CLIPTokenizer.from_pretrained(folder)
    assert tok("a photo of a cat")["input_ids"] == [49406, 320, 1125, 539, 320, 2368, 49407]
    assert tok("")["input_ids"] == [49406, 49407] and len(tok.get_vocab()) == 49408
    assert tok.tokenize("Hello,  WORLD!!") == ["hello</w>", ",</w>", "world</w>", "!!</w>"]
    assert tok.tokenize("it's 42") == ["it</w>", "'s</w>", "4</w>", "2</w>"]
    ids = tok("a photo of a cat")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "a photo of a cat"


@test
def torch_shims_have_torch_2_semantics():
    """What ComfyUI calls behaves as in the torch that introduced it."""
    need_torch()
    import importlib.util
    spec = importlib.util.spec_from_file_location("mk_torchshims",
                                                  os.path.join(HERE, "torchshims.py"))
    shims = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shims)
    shims.apply(torch)
    assert shims.apply(torch) == []
    assert torch.float16.itemsize == 2 and torch.bool.itemsize == 1
    assert torch.zeros(3, 4, dtype=torch.float16)[:, :2].nbytes == 12
    assert torch.compiler.is_compiling() is False
    e = torch.nn.Embedding(10, 4, None, None, 2.0, False, False, None, True, "cpu", torch.float16)
    assert e.weight.dtype == torch.float16 and not e.weight.requires_grad
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    src = {k: v.clone().half() for k, v in m.state_dict().items()}
    m.load_state_dict(src, assign=True)
    assert m[0].weight.data_ptr() == src["0.weight"].data_ptr()
    assert m[0].weight.dtype == torch.float16  # the state dict's, as torch 2.1 assigns
    assert isinstance(m[0].weight, torch.nn.Parameter) and m[0].weight.requires_grad
    assert m[1].running_mean.data_ptr() == src["1.running_mean"].data_ptr()
    lin = torch.nn.Linear(3, 4)
    kept = lin.weight.data_ptr()
    lin.load_state_dict({"weight": torch.ones(4, 3), "bias": torch.zeros(4)}, assign=False)
    assert lin.weight.data_ptr() == kept and float(lin.weight.sum()) == 12.0
    r = lin.load_state_dict({"weight": torch.ones(4, 3), "x": torch.ones(1)},
                            strict=False, assign=True)
    assert r.missing_keys == ["bias"] and r.unexpected_keys == ["x"]



@test
def a_run_starts_with_the_model_files_out_of_the_page_cache():
    """real_comfyui.run_case drops the model files' pages before each run:
    an earlier run's cached file would load without a disk read or a charge
    to the new run's cgroup, so the later configuration would win."""
    import real_comfyui
    fd, path = tempfile.mkstemp(dir="/var/tmp", prefix="ramcache-test-uncache-")
    try:
        os.write(fd, os.urandom(1 << 20) * 8)
        os.fsync(fd)
        with open(path, "rb") as f:
            f.read()
        before = real_comfyui.cached_bytes(fd)
        if before == 0:
            raise Skip("this file system keeps no page cache to drop (tmpfs?)")
        left = real_comfyui.uncache([{"path": path}])
        after = real_comfyui.cached_bytes(fd)
        assert left == after == 0, (before, left, after)
        print(f"# {before >> 20} MiB cached before, {after} bytes after")
    finally:
        os.close(fd)
        os.unlink(path)

main()
