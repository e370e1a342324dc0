"""Stand-in of comfy_execution/graph.py: DynamicPrompt and an ExecutionList
that, like upstream, keeps each pending node's inputs in execution_cache
and its listeners in execution_cache_listeners."""
import asyncio


class DynamicPrompt:
    def __init__(self, original_prompt):
        self.original_prompt = original_prompt
        self.ephemeral_prompt = {}
        self.ephemeral_parents = {}
        self.ephemeral_display = {}

    def get_node(self, node_id):
        if node_id in self.ephemeral_prompt:
            return self.ephemeral_prompt[node_id]
        return self.original_prompt[node_id]

    def has_node(self, node_id):
        return node_id in self.original_prompt or node_id in self.ephemeral_prompt

    def add_ephemeral_node(self, node_id, node_info, parent_id, display_id):
        self.ephemeral_prompt[node_id] = node_info
        self.ephemeral_parents[node_id] = parent_id
        self.ephemeral_display[node_id] = display_id

    def get_parent_node_id(self, node_id):
        return self.ephemeral_parents.get(node_id, None)

    def get_real_node_id(self, node_id):
        while node_id in self.ephemeral_parents:
            node_id = self.ephemeral_parents[node_id]
        return node_id

    def all_node_ids(self):
        return set(self.original_prompt) | set(self.ephemeral_prompt)


def is_link(v):
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)


class ExecutionList:
    def __init__(self, dynprompt, output_cache):
        self.dynprompt = dynprompt
        self.output_cache = output_cache
        self.pendingNodes = {}
        self.blockers = {}
        self.blocking = {}
        self.staged_node_id = None
        self.execution_cache = {}
        self.execution_cache_listeners = {}

    def is_cached(self, node_id):
        return self.output_cache.get_local(node_id) is not None

    def add_node(self, node_id):
        if node_id in self.pendingNodes:
            return
        self.pendingNodes[node_id] = True
        self.blockers.setdefault(node_id, set())
        self.blocking.setdefault(node_id, set())
        for value in self.dynprompt.get_node(node_id)["inputs"].values():
            if is_link(value):
                self.add_strong_link(value[0], value[1], node_id)

    def add_strong_link(self, from_node_id, from_socket, to_node_id):
        if not self.is_cached(from_node_id) or from_node_id in self.pendingNodes:
            self.add_node(from_node_id)
            self.blockers[to_node_id].add(from_node_id)
            self.blocking[from_node_id].add(to_node_id)
        self.cache_link(from_node_id, to_node_id)

    def cache_link(self, from_node_id, to_node_id):
        self.execution_cache.setdefault(to_node_id, {})[from_node_id] = \
            self.output_cache.get_local(from_node_id)
        self.execution_cache_listeners.setdefault(from_node_id, set()).add(to_node_id)

    def get_cache(self, from_node_id, to_node_id):
        value = self.execution_cache.get(to_node_id, {}).get(from_node_id)
        if value is not None:
            self.output_cache.set_local(from_node_id, value)  # write back on touch
        return value

    def cache_update(self, node_id, value):
        for to_node_id in self.execution_cache_listeners.get(node_id, ()):
            if to_node_id in self.execution_cache:
                self.execution_cache[to_node_id][node_id] = value

    def is_empty(self):
        return not self.pendingNodes

    async def stage_node_execution(self):
        ready = [n for n in self.pendingNodes if not self.blockers[n]]
        if not ready:
            return None, {"node_id": next(iter(self.pendingNodes)),
                          "exception_message": "cycle"}, RuntimeError("cycle")
        self.staged_node_id = ready[0]
        await asyncio.sleep(0)
        return self.staged_node_id, None, None

    def unstage_node_execution(self):
        self.staged_node_id = None

    def complete_node_execution(self):
        node_id = self.staged_node_id
        del self.pendingNodes[node_id]
        for to_id in self.blocking.pop(node_id, ()):
            self.blockers[to_id].discard(node_id)
        self.blockers.pop(node_id, None)
        self.execution_cache.pop(node_id, None)
        self.execution_cache_listeners.pop(node_id, None)
        self.staged_node_id = None
