"""ComfyUI's models as the package sees them: what a load takes, what a
cached model costs to load again, and its unload through ComfyUI's own
model manager.

Every model file ComfyUI loads (checkpoints, text encoders, VAEs, LoRAs,
UNets) is read by comfy.utils.load_torch_file, inside the loader node that
then builds the models from it. Before the file is read the package
announces to the agent what the node will take (the file's bytes times the
RSS growth per file byte of this process's earlier loads: expect_bytes on
the page), so the agent makes room before the load runs into the limit;
when the node ends it measures what the load took and withdraws the
announcement.

On CPU a model lives as long as the loader's cache entry holds its
ModelPatcher: comfy.model_management keeps only weak references
(LoadedModel) for the models it has loaded, patched with LoRAs or not.
So evicting a model is ComfyUI's own unload of what the entry holds (its
free_memory, with every other loaded model kept, as its own callers do:
patches undone, backups freed, the model off its loaded list), then the
entry dropped as ComfyUI's ram_release drops it. Loads and LoadWatch are
pure (the page, the RSS reader and the clock are passed in); unload()
takes comfy.model_management as an argument.
"""
import os
import time

from .sizing import is_model_patcher

# RSS growth per byte of file before any load was measured: fp16 files
# become fp32 UNet and VAE weights on CPU, and the file's own pages count
# while it is mapped. Learned from each load after the first.
FIRST_RATIO = 2.5
LEARN = 0.5  # weight of the newest load in the running figures


def file_bytes(path):
    """Size of the model file at @path, 0 when it cannot be read (or is
    no path: os.stat of an int would be a descriptor's)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return 0
    try:
        return max(0, os.stat(path).st_size)
    except (OSError, TypeError, ValueError):
        return 0


def _blend(old, new):
    return new if old is None else old + LEARN * (new - old)


class Loads:
    """The model loads of this process, measured: how many, their seconds
    and file bytes, the RSS growth per file byte (what the next load is
    announced as) and the seconds per byte of RAM a load took (a cached
    model's reload cost)."""

    def __init__(self):
        self.count = 0
        self.seconds = 0.0
        self.file_bytes = 0
        self.ratio = None  # RSS growth per file byte
        self.rate = None  # seconds per byte of RAM taken

    def estimate(self, nbytes):
        """Bytes a load of a @nbytes file is expected to take."""
        ratio = FIRST_RATIO if self.ratio is None else max(1.0, self.ratio)
        return int(max(0, nbytes) * ratio)

    def record(self, nbytes, seconds, grown):
        """A load of @nbytes of files took @seconds and grew the RSS by
        @grown bytes (negative when the agent freed more meanwhile: then
        it teaches nothing of the ratio)."""
        self.count += 1
        self.seconds += max(0.0, seconds)
        self.file_bytes += max(0, nbytes)
        if nbytes > 0 and grown > 0:
            self.ratio = _blend(self.ratio, grown / nbytes)
            if seconds > 0:
                self.rate = _blend(self.rate, seconds / grown)

    def reload_ns(self, nbytes):
        """What loading @nbytes of model again costs, in ns; 0 unknown."""
        if self.rate is None or nbytes <= 0:
            return 0
        return int(nbytes * self.rate * 1e9)

    def status(self):
        return {"loads": self.count, "load_s": round(self.seconds, 3),
                "file_bytes": self.file_bytes,
                "ratio": None if self.ratio is None else round(self.ratio, 3),
                "s_per_gib": None if self.rate is None else round(self.rate * (1 << 30), 3)}


class LoadWatch:
    """The model load of the node running now: announced to the agent
    before each file is read, measured when the node ends."""

    def __init__(self, loads, read_rss, freed=lambda: 0, clock=time.monotonic):
        self.loads, self._rss, self._freed, self._clock = loads, read_rss, freed, clock
        self.running = None  # {"bytes", "rss0", "freed0", "t0"} while a node loads
        self.announced = 0  # bytes announced for the file being read

    def begin(self, path, page):
        """A file at @path is about to be read in this node: announce
        what it will take on @page (None: no page). Returns the bytes
        announced."""
        n = file_bytes(path)
        if self.running is None:
            self.running = {"bytes": 0, "rss0": self._rss(), "freed0": self._freed(),
                            "t0": self._clock(), "kept": 0}
        self.running["bytes"] += n
        self.announced = self.loads.estimate(n)
        if page is not None:
            page.expect(self.announced)
        return self.announced

    def reuse(self, page, nbytes):
        """Evictions made for this load (before it or while it runs) left
        @nbytes in the process's heap, which the load will take again: the
        announcement shrinks by them (its stamp kept: the same
        announcement, smaller), and the load counts them as taken (its RSS
        does not grow by them: the next announcement would learn too
        little)."""
        nbytes = max(0, nbytes)
        self.announced = max(0, self.announced - nbytes)
        if self.running is not None:
            self.running["kept"] += nbytes
        if page is not None:
            page.expect_less(self.announced)

    def end(self, page):
        """The node ended: the load is measured, the announcement
        withdrawn. True when a load ran in it."""
        run, self.running, self.announced = self.running, None, 0
        if run is None:
            return False
        if page is not None:
            page.expect(0)
        # what evictions returned meanwhile was taken by the load too, and
        # what they left in the heap for it
        grown = self._rss() - run["rss0"] + self._freed() - run["freed0"] + run["kept"]
        self.loads.record(run["bytes"], self._clock() - run["t0"], grown)
        return True


def patchers(value):
    """The ModelPatchers a cache entry holds: a MODEL output itself, and
    the patcher of a CLIP or VAE output (nested in tuples and lists)."""
    out, stack, seen = [], [getattr(value, "outputs", value)], set()
    while stack:
        x = stack.pop()
        if id(x) in seen or len(seen) > 4096:
            continue
        seen.add(id(x))
        if is_model_patcher(x):
            out.append(x)
        elif is_model_patcher(getattr(x, "patcher", None)):
            out.append(x.patcher)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out


def loaded(mm):
    """[(class name, bytes)] of the models ComfyUI's manager has loaded."""
    out = []
    for lm in list(getattr(mm, "current_loaded_models", ()) or ()):
        m = getattr(lm, "model", None)
        try:
            out.append((type(getattr(m, "model", m)).__name__, int(m.model_size())))
        except Exception:  # a model being torn down: not listed
            continue
    return out


def unload(mm, value):
    """Unload every model of the entry @value that ComfyUI's manager has
    loaded, with its own free_memory keeping all the others. Worker thread
    only: it walks and edits the loaded list. Returns how many went."""
    mine = {id(p) for p in patchers(value)}
    lms = list(getattr(mm, "current_loaded_models", ()) or ())
    ours = [lm for lm in lms if id(getattr(lm, "model", None)) in mine]
    if not ours or not callable(getattr(mm, "free_memory", None)):
        return 0
    keep = [lm for lm in lms if all(lm is not o for o in ours)]
    for device in {id(lm.device): lm.device for lm in ours}.values():
        mm.free_memory(1e30, device, keep_loaded=keep)
    left = {id(lm) for lm in getattr(mm, "current_loaded_models", ())}
    return sum(1 for lm in ours if id(lm) not in left)
