"""Stand-in for einops, which Debian 12 does not ship: rearrange, repeat
and reduce on torch tensors, with the real pattern language (named axes,
parenthesised groups, anonymous lengths, "()", "...", axis lengths as
keyword arguments) and the real results; ComfyUI's UNet, attention and
VAE code call them on every forward pass."""
import torch

from ._pattern import EinopsError, plan

__all__ = ["EinopsError", "rearrange", "reduce", "repeat"]
__version__ = "0+ramcache.standin"

REDUCTIONS = {
    "sum": lambda x, dims: x.sum(dim=dims),
    "mean": lambda x, dims: x.mean(dim=dims),
    "max": lambda x, dims: x.amax(dim=dims),
    "min": lambda x, dims: x.amin(dim=dims),
    "prod": lambda x, dims: _one_by_one(torch.prod, x, dims),
    "any": lambda x, dims: _one_by_one(torch.any, x, dims),
    "all": lambda x, dims: _one_by_one(torch.all, x, dims),
}


def _one_by_one(fn, x, dims):
    """@fn over several dims for torch functions that take one at a time
    (the highest first, so the lower indices stay valid)."""
    for d in sorted(dims, reverse=True):
        x = fn(x, dim=d)
    return x


def _apply(op, tensor, pattern, reduction, axes_lengths):
    """@tensor (or a list of same-shaped tensors, stacked on a new first
    axis, as einops does) through the plan of @op for @pattern."""
    if isinstance(tensor, (list, tuple)):
        tensor = torch.stack(list(tensor))
    axes = tuple(sorted((k, int(v)) for k, v in axes_lengths.items()))
    steps = plan(op, pattern, tuple(tensor.shape), axes)
    x = tensor
    if steps["reshape_in"] != list(x.shape):
        x = x.reshape(steps["reshape_in"])
    if steps["reduce"]:
        fn = reduction if callable(reduction) else REDUCTIONS.get(reduction)
        if fn is None:
            raise EinopsError(f"unknown reduction {reduction!r}")
        x = fn(x, tuple(steps["reduce"]))
    if steps["permute"]:
        x = x.permute(steps["permute"])
    if steps["unsqueeze_shape"]:
        x = x.reshape(steps["unsqueeze_shape"])
    if steps["expand"]:
        x = x.expand(steps["expand"])
    if steps["reshape_out"] != list(x.shape):
        x = x.reshape(steps["reshape_out"])
    return x


def rearrange(tensor, pattern, **axes_lengths):
    """Reorder, split and merge axes: rearrange(x, 'b (h w) c -> b c h w', h=8)."""
    return _apply("rearrange", tensor, pattern, None, axes_lengths)


def repeat(tensor, pattern, **axes_lengths):
    """rearrange that may also add axes, of the lengths given:
    repeat(x, 'b j -> (b h) () j', h=8)."""
    return _apply("repeat", tensor, pattern, None, axes_lengths)


def reduce(tensor, pattern, reduction, **axes_lengths):
    """rearrange that reduces (sum, mean, max, min, prod, any, all or a
    callable f(tensor, dims)) the axes the right side lacks."""
    return _apply("reduce", tensor, pattern, reduction, axes_lengths)
