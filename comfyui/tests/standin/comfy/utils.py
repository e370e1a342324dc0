PROGRESS_BAR_ENABLED = True
PROGRESS_BAR_HOOK = None


def set_progress_bar_global_hook(function):
    global PROGRESS_BAR_HOOK
    PROGRESS_BAR_HOOK = function


class ProgressBar:
    """Copies the global hook when built, like upstream."""

    def __init__(self, total, node_id=None):
        self.total = total
        self.current = 0
        self.hook = PROGRESS_BAR_HOOK
        self.node_id = node_id

    def update_absolute(self, value, total=None, preview=None):
        if total is not None:
            self.total = total
        self.current = min(value, self.total)
        if self.hook is not None:
            self.hook(self.current, self.total, preview, node_id=self.node_id)

    def update(self, value):
        self.update_absolute(self.current + value)


def load_torch_file(ckpt, safe_load=False, device=None, return_metadata=False):
    """Reads the checkpoint at path @ckpt into CPU tensors (here: allocates
    as many MiB as the file holds; a number of MiB stands for a file)."""
    import os
    import faketorch
    mib = os.path.getsize(ckpt) >> 20 if isinstance(ckpt, str) else int(ckpt)
    sd = {"weight": faketorch.mib(mib)}
    return (sd, {}) if return_metadata else sd
