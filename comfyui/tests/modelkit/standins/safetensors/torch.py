"""safetensors.torch: load_file/load (reading) and save_file/save (the
real writer's layout: tensors sorted by dtype alignment, largest first,
then by name, stored contiguously in that order; the JSON header, metadata
first, padded with spaces to a multiple of 8 bytes)."""
import io
import json
import os
import struct

import torch

from ._format import BY_DTYPE, BY_NAME, SafetensorError, parse_header, safe_open

__all__ = ["load", "load_file", "save", "save_file"]


def load_file(filename, device="cpu"):
    """Every tensor of the file, each a view of its private mapping."""
    with safe_open(filename, framework="pt", device=device) as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def load(data):
    """Every tensor of the serialized bytes @data, each a copy of its bytes
    (the real load deserializes into fresh buffers)."""
    n, infos, _ = parse_header(data, len(data))
    out = {}
    for name in sorted(infos):
        info = infos[name]
        dtype = BY_NAME[info["dtype"]]
        start, stop = (o + 8 + n for o in info["data_offsets"])
        if start == stop:
            out[name] = torch.empty(info["shape"], dtype=dtype)
            continue
        raw = torch.frombuffer(bytearray(data[start:stop]), dtype=torch.uint8)
        out[name] = raw.view(dtype).reshape(info["shape"])
    return out


def _check(tensors, metadata):
    """The real writer's refusals: non-tensors, sparse or non-contiguous
    tensors, tensors sharing memory, non-string metadata."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor "
                             f"but received {type(t)}")
        if t.layout != torch.strided:
            raise ValueError(f"You are trying to save a sparse tensor: `{name}` "
                             "which this library does not support.")
        if not t.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: `{name}` which is "
                             "not allowed. Call `.contiguous()` on it to pack it before saving.")
        if t.dtype not in BY_DTYPE:
            raise SafetensorError(f"dtype {t.dtype} of `{name}` has no safetensors name")
    owners = {}
    for name, t in tensors.items():
        if t.numel():
            storage = t.storage()
            key = (t.device, storage.data_ptr(), storage.nbytes())
            owners.setdefault(key, []).append(name)
    shared = [sorted(v) for v in owners.values() if len(v) > 1]
    if shared:
        raise RuntimeError("Some tensors share memory, this will lead to duplicate memory "
                           f"on disk: {shared}")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str)
                                        for k, v in metadata.items()):
        raise SafetensorError("metadata keys and values must be strings")


def _layout(tensors, metadata):
    """(padded header bytes, tensor names in file order)."""
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name] = {"dtype": BY_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return raw, order


def _write(f, tensors, metadata):
    """The file's bytes into @f, each tensor's straight from its memory."""
    _check(tensors, metadata)
    raw, order = _layout(tensors, metadata)
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    for name in order:
        t = tensors[name].detach()
        if t.numel():
            f.write(t.cpu().reshape(-1).view(torch.uint8).numpy())


def save_file(tensors, filename, metadata=None):
    """Write @tensors ({name: tensor}) to @filename."""
    with open(os.fspath(filename), "wb") as f:
        _write(f, tensors, metadata)


def save(tensors, metadata=None):
    """The serialized bytes of @tensors."""
    buf = io.BytesIO()
    _write(buf, tensors, metadata)
    return buf.getvalue()
