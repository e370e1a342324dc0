"""A tiny tensor: numel, element_size, device, storage identity. Its storage
owns a real mmap-sized allocation so that freeing it lowers RSS."""
import mmap


class device:
    def __init__(self, type):
        self.type = type

    def __repr__(self):
        return f"device(type={self.type!r})"


class UntypedStorage:
    def __init__(self, nbytes, real=True):
        self._n = nbytes
        self._buf = None
        if real and nbytes:
            self._buf = mmap.mmap(-1, nbytes)
            for off in range(0, nbytes, 4096):  # touch every page
                self._buf[off] = 1

    def data_ptr(self):
        return id(self)

    def nbytes(self):
        return self._n


class Tensor:
    def __init__(self, shape, element_size=4, device_type="cpu", storage=None):
        self.shape = tuple(shape)
        self._esize = element_size
        self.device = device(device_type)
        n = self.numel() * element_size
        self._storage = storage or UntypedStorage(n, real=device_type == "cpu")

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return self._esize

    def untyped_storage(self):
        return self._storage

    def view(self, *shape):
        return Tensor(shape, self._esize, self.device.type, self._storage)


def mib(n, device_type="cpu"):
    return Tensor((n, 256, 1024), 4, device_type)


class Module:
    """Enough of torch.nn.Module for a model patcher's weights."""

    def __init__(self, *weights):
        self._w = list(weights)

    def parameters(self):
        return iter(self._w)

    def buffers(self):
        return iter(())
