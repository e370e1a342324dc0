"""The safetensors file format: header parsing and checking as the real
reader does (same error names, which ComfyUI's comfy/utils.py matches on:
"HeaderTooLarge", "MetadataIncompleteBuffer"), the dtype names, and
safe_open over a private file mapping."""
import json
import math
import os
import struct

import torch

MAX_HEADER_SIZE = 100_000_000
# The real format's dtype names in the real package's order (its Dtype
# enum, smallest alignment first). float8 names are taken only when this
# torch has them as dtypes of their own (torch 1.13 has none: some
# launchers alias them to uint8, which must not shadow U8).
DTYPE_NAMES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
               "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
TORCH_NAMES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2",
               "F8_E4M3": "float8_e4m3fn", "I16": "int16", "U16": "uint16",
               "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32",
               "F32": "float32", "C64": "complex64", "F64": "float64", "I64": "int64",
               "U64": "uint64"}


class SafetensorError(Exception):
    """The real package's exception type for format errors."""


def _dtype_tables():
    """{name: torch dtype} and {torch dtype: name} for the dtypes this
    torch really has, each dtype under one name only."""
    by_name, by_dtype = {}, {}
    for name in DTYPE_NAMES:
        dt = getattr(torch, TORCH_NAMES[name], None)
        if isinstance(dt, torch.dtype) and dt not in by_dtype:
            by_name[name], by_dtype[dt] = dt, name
    return by_name, by_dtype


BY_NAME, BY_DTYPE = _dtype_tables()


def header_error(kind):
    return SafetensorError(f"Error while deserializing header: {kind}")


def parse_header(head, total):
    """(header length n, tensor infos, metadata) from @head, the file's
    first bytes (at least 8 + n of them), for a buffer of @total bytes."""
    if total < 8 or len(head) < 8:
        raise header_error("HeaderTooSmall")
    n = struct.unpack("<Q", head[:8])[0]
    if n > MAX_HEADER_SIZE:
        raise header_error("HeaderTooLarge")
    if 8 + n > total or 8 + n > len(head):
        raise header_error("InvalidHeaderLength")
    try:
        text = bytes(head[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError:
        raise header_error("InvalidHeader") from None
    if not text.startswith("{"):
        raise header_error("InvalidHeaderStart")
    try:
        header = json.loads(text)
    except ValueError as e:
        raise header_error(f"InvalidHeaderDeserialization({e})") from None
    metadata = header.pop("__metadata__", None)
    check_infos(header, total - 8 - n)
    return n, header, metadata


def check_infos(infos, data_len):
    """The real reader's checks: every tensor's byte size matches its
    dtype and shape, the tensors tile the data with no gap or overlap, and
    the data ends where the buffer does."""
    end = 0
    for name, info in sorted(infos.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        start, stop = info["data_offsets"]
        if start != end or stop < start:
            raise header_error(f"InvalidOffset({name!r})")
        dtype = BY_NAME.get(info["dtype"])
        if dtype is None:
            raise SafetensorError(f"Unsupported dtype {info['dtype']} for tensor {name}")
        nbytes = math.prod(info["shape"]) * torch.empty((), dtype=dtype).element_size()
        if nbytes != stop - start:
            raise header_error(f"TensorInvalidInfo({name!r})")
        end = stop
    if end != data_len:
        raise header_error("MetadataIncompleteBuffer")


def read_head(path):
    """The file's size and its first 8 + header-length bytes."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) == 8:
            n = struct.unpack("<Q", head)[0]
            if n <= MAX_HEADER_SIZE:
                head += f.read(n)
    return size, head


def parse_device(device):
    """A torch.device from what safe_open accepts: a name ("cpu",
    "cuda:0"), an index (a CUDA device) or a torch.device."""
    if isinstance(device, int):
        return torch.device("cuda", device)
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise SafetensorError(f"device {device} is invalid") from None


class safe_open:  # noqa: N801 -- the real package's name
    """A safetensors file opened lazily: tensors are views of one private
    mapping of the whole file, made when asked (get_tensor)."""

    def __init__(self, filename, framework, device="cpu"):
        """Reads and checks the header, maps the whole file privately
        (torch.ByteStorage.from_file(shared=False), as the real package
        does under torch >= 1.11)."""
        if framework not in ("pt", "torch", "pytorch"):
            raise SafetensorError(f"framework {framework} is not provided by this stand-in")
        path = os.fspath(filename)
        if not os.path.exists(path):
            raise FileNotFoundError(f"No such file or directory: {path!r}")
        self._device = parse_device(device)
        size, head = read_head(path)
        n, self._infos, self._metadata = parse_header(head, size)
        self._offset = 8 + n
        self._storage = torch.ByteStorage.from_file(path, shared=False, size=size).untyped()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._storage = None

    def _open(self):
        if self._storage is None:
            raise SafetensorError("File is closed")
        return self._storage

    def metadata(self):
        self._open()
        return self._metadata

    def keys(self):
        self._open()
        return sorted(self._infos)

    def offset_keys(self):
        self._open()
        return sorted(self._infos, key=lambda k: self._infos[k]["data_offsets"][0])

    def get_tensor(self, name):
        """torch.asarray(storage[start:stop], dtype=uint8).view(dtype)
        .reshape(shape): no copy, as the real package does."""
        storage = self._open()
        info = self._infos.get(name)
        if info is None:
            raise SafetensorError(f"File does not contain tensor {name}")
        dtype, shape = BY_NAME[info["dtype"]], info["shape"]
        start, stop = (o + self._offset for o in info["data_offsets"])
        if start == stop:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.asarray(storage[start:stop], dtype=torch.uint8).view(dtype).reshape(shape)
        return t if self._device.type == "cpu" else t.to(self._device)
