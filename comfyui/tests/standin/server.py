"""Stand-in of ComfyUI's server.py as custom nodes see it: PromptServer is
built before custom nodes load (PromptServer.instance), they add aiohttp
routes to its RouteTableDef, and add_routes() mounts them afterwards."""
from aiohttp import web


class PromptServer:
    instance = None

    def __init__(self, loop=None):
        PromptServer.instance = self
        self.loop = loop
        self.routes = web.RouteTableDef()
        self.app = web.Application()
        self.client_id = None
        self.last_node_id = None
        self.last_prompt_id = None
        self.progress = []

    def add_routes(self):
        self.app.add_routes(self.routes)
