"""When a thread other than ComfyUI's prompt worker may touch its output
cache: only while the worker runs a node's own code.

ComfyUI's worker touches the output cache in its bookkeeping around each
node (get, set, is_cached and cache_link of the execution list, the RAM
cache's ram_release walking every entry, clean_unused at a prompt's start)
and never while a node's function runs (execution.get_output_data), except
through comfy.memory_management.extra_ram_release, which the package
wraps. The worker opens the window right before a node's function and
closes it right after; both take the lock, and so does everything the
package does to the cache. So the serving thread evicts either while no
prompt runs (it holds the executor's lock) or inside the window, holding
the lock that the worker needs to close it: ComfyUI's bookkeeping and the
package's never overlap, whatever the GIL does between them.
"""
import contextlib
import threading


class NodeWindow:
    def __init__(self):
        # Re-entrant: the worker serves commands at safe points inside the
        # window, and ComfyUI's own release, called in a node, closes it.
        self.lock = threading.RLock()
        self.node = None  # the node whose code runs now, else None
        self.opened = 0  # windows opened so far

    def open(self, node_id):
        with self.lock:
            self.node = node_id
            self.opened += 1

    def close(self):
        """Close it (waiting for an eviction in progress); the node it was
        open for, or None."""
        with self.lock:
            node, self.node = self.node, None
            return node

    @contextlib.contextmanager
    def shut(self):
        """Closed for the duration (ComfyUI's own code walks the cache),
        open again afterwards if it was."""
        node = self.close()
        try:
            yield
        finally:
            if node is not None:
                with self.lock:
                    self.node = node
