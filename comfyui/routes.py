"""GET /ramcache/status on ComfyUI's own server: the bridge's status as JSON
(agent attached, level, headroom, eta, last evictions with latency), read by
the frontend extension in web/ramcache.js."""
import logging

from .bridge import BRIDGE

log = logging.getLogger("ramcache")

ROUTE = "/ramcache/status"


def install():
    """Add the route to PromptServer.instance; False when there is none
    (ComfyUI builds its server before it loads custom nodes)."""
    try:
        from aiohttp import web
        from server import PromptServer
    except Exception as e:
        log.info("ramcache: no ComfyUI server to add %s to (%s)", ROUTE, e)
        return False
    inst = getattr(PromptServer, "instance", None)
    routes = getattr(inst, "routes", None)
    if routes is None:
        log.info("ramcache: no ComfyUI server to add %s to", ROUTE)
        return False

    @routes.get(ROUTE)
    async def ramcache_status(request):
        return web.json_response(BRIDGE.status(), headers={"Cache-Control": "no-store"})
    return True
