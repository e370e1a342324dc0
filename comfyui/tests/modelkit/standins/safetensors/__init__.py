"""Stand-in for the safetensors package, which Debian 12 does not ship.

The real file format (an 8-byte little-endian header length, a JSON header
of dtype/shape/data_offsets per tensor with an optional "__metadata__",
then the data), read the way the real package reads it under torch >= 1.11:
the file is mapped privately (torch.ByteStorage.from_file, shared=False)
and each tensor is a zero-copy view of that mapping, so its pages are
file-backed and fault in when first read, as they do for real users.
Only the PyTorch framework is provided: that is all ComfyUI uses.
"""
from ._format import SafetensorError, safe_open

__all__ = ["SafetensorError", "safe_open"]
__version__ = "0+ramcache.standin"
