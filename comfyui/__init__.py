"""ramcache-bpf for ComfyUI: publishes the node output cache to the
ramcache-bpf agent and evicts entries it asks for, at safe points of the
prompt worker. See README.md."""
import atexit
import logging

from . import hooks
from .bridge import BRIDGE
from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]

try:
    if hooks.install():
        atexit.register(BRIDGE.close)
except Exception:  # never break ComfyUI's start-up
    logging.getLogger("ramcache").exception("ramcache: not installed")
