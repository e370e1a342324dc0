"""einops.layers.torch: Rearrange and Reduce as torch.nn.Module layers
(ComfyUI builds some models with Rearrange inside nn.Sequential)."""
import torch

from .. import rearrange, reduce

__all__ = ["Rearrange", "Reduce"]


class Rearrange(torch.nn.Module):
    """rearrange(x, pattern, **axes_lengths) as a layer."""

    def __init__(self, pattern, **axes_lengths):
        super().__init__()
        self.pattern, self.axes_lengths = pattern, axes_lengths

    def forward(self, x):
        return rearrange(x, self.pattern, **self.axes_lengths)

    def extra_repr(self):
        return repr(self.pattern)


class Reduce(torch.nn.Module):
    """reduce(x, pattern, reduction, **axes_lengths) as a layer."""

    def __init__(self, pattern, reduction, **axes_lengths):
        super().__init__()
        self.pattern, self.reduction, self.axes_lengths = pattern, reduction, axes_lengths

    def forward(self, x):
        return reduce(x, self.pattern, self.reduction, **self.axes_lengths)

    def extra_repr(self):
        return f"{self.pattern!r}, {self.reduction!r}"
