"""ramcache-bpf for ComfyUI: publishes the node output cache to the
ramcache-bpf agent and evicts entries it asks for, at safe points of the
prompt worker; shows the agent's view in the UI. Pure Python, no build step.
See README.md."""
import atexit
import logging

from . import hooks, routes
from .bridge import BRIDGE
from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

WEB_DIRECTORY = "./web"

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS", "WEB_DIRECTORY"]

try:
    if hooks.install():
        atexit.register(BRIDGE.close)
        routes.install()
except Exception:  # never break ComfyUI's start-up
    logging.getLogger("ramcache").exception("ramcache: not installed")
