"""Stand-in of ComfyUI's execution.py: CacheType/CacheSet, the module-level
async execute() of one node, get_output_data() (the node's own function,
called by execute() through the module's name, as upstream), and
PromptExecutor whose execute() runs execute_async() under asyncio.run on the
prompt worker thread, with 0.33.0's RAM-cache releases after every node."""
import asyncio
import enum
import logging
from typing import NamedTuple

import comfy.memory_management
import comfy.model_management
import nodes
from comfy_execution import caching
from comfy_execution.caching import (RAM_CACHE_LARGE_INTERMEDIATE, CacheKeySetID,
                                     CacheKeySetInputSignature, HierarchicalCache,
                                     LRUCache, NullCache, RAMPressureCache)
from comfy_execution.graph import DynamicPrompt, ExecutionList, is_link


class ExecutionResult(enum.Enum):
    SUCCESS = 0
    FAILURE = 1
    PENDING = 2


class CacheType(enum.Enum):
    CLASSIC = 0
    LRU = 1
    NONE = 2
    RAM_PRESSURE = 3


class IsChangedCache:
    """A node's IS_CHANGED value for this prompt (False without one, NaN
    when it fails), computed once from its constant inputs, as upstream."""

    def __init__(self, prompt_id, dynprompt, outputs_cache):
        self.dynprompt = dynprompt
        self.is_changed = {}

    async def get(self, node_id):
        if node_id in self.is_changed:
            return self.is_changed[node_id]
        node = self.dynprompt.get_node(node_id)
        class_def = nodes.NODE_CLASS_MAPPINGS[node["class_type"]]
        if not hasattr(class_def, "IS_CHANGED"):
            self.is_changed[node_id] = False
            return False
        consts = {k: v for k, v in node["inputs"].items() if not is_link(v)}
        try:
            value = (class_def.IS_CHANGED(**consts),)
        except Exception as e:
            logging.warning("WARNING: %s", e)
            value = float("NaN")
        self.is_changed[node_id] = value
        return value


class CacheEntry(NamedTuple):
    ui: dict
    outputs: list


class CacheSet:
    def __init__(self, cache_type=None, cache_args={}):
        if cache_type == CacheType.NONE:
            self.init_null_cache()
        elif cache_type == CacheType.RAM_PRESSURE:
            self.init_ram_cache(cache_args.get("ram", 16.0))
        elif cache_type == CacheType.LRU:
            self.init_lru_cache(cache_args.get("lru", 0))
        else:
            self.init_classic_cache()
        self.all = [self.outputs, self.objects]

    def init_classic_cache(self):
        self.outputs = HierarchicalCache(CacheKeySetInputSignature)
        self.objects = HierarchicalCache(CacheKeySetID)

    def init_lru_cache(self, cache_size):
        self.outputs = LRUCache(CacheKeySetInputSignature, max_size=cache_size)
        self.objects = HierarchicalCache(CacheKeySetID)

    def init_ram_cache(self, min_headroom):
        self.outputs = RAMPressureCache(CacheKeySetInputSignature)
        self.objects = HierarchicalCache(CacheKeySetID)

    def init_null_cache(self):
        self.outputs = NullCache()
        self.objects = NullCache()


async def get_output_data(prompt_id, unique_id, obj, input_data_all,
                          execution_block_cb=None, pre_execute_cb=None, v3_data=None):
    """The node's function on its inputs (upstream maps it over input lists
    and gathers ui and subgraph results; here one call, its raw return)."""
    nodes.before_node_execution()
    return getattr(obj, obj.FUNCTION)(**input_data_all)


async def execute(server, dynprompt, caches, current_item, extra_data, executed,
                  prompt_id, execution_list, pending_subgraph_results,
                  pending_async_nodes, ui_outputs):
    unique_id = current_item
    node = dynprompt.get_node(unique_id)
    class_def = nodes.NODE_CLASS_MAPPINGS[node["class_type"]]
    cached = await caches.outputs.get(unique_id)
    if cached is not None:
        execution_list.cache_update(unique_id, cached)
        return ExecutionResult.SUCCESS, None, None
    if unique_id in pending_subgraph_results:
        # the expansion ran: gather its results
        outputs = []
        for from_id, socket in pending_subgraph_results.pop(unique_id):
            outputs.append(execution_list.get_cache(from_id, unique_id).outputs[socket])
        entry = CacheEntry(ui={}, outputs=outputs)
        await caches.outputs.set(unique_id, entry)
        execution_list.cache_update(unique_id, entry)
        executed.add(unique_id)
        return ExecutionResult.SUCCESS, None, None
    try:
        kwargs = {}
        for name, value in node["inputs"].items():
            if is_link(value):
                entry = execution_list.get_cache(value[0], unique_id)
                if entry is None:
                    raise RuntimeError(f"input {name} of {unique_id} is missing")
                kwargs[name] = entry.outputs[value[1]][0]
            else:
                kwargs[name] = value
        obj = class_def()
        server.last_node_id = unique_id
        result = await get_output_data(prompt_id, unique_id, obj, kwargs)
        ui = {}
        if isinstance(result, dict) and "expand" in result:
            # graph expansion: ephemeral children with this node as parent
            new_ids = list(result["expand"])
            for child_id, info in result["expand"].items():
                dynprompt.add_ephemeral_node(child_id, info, unique_id, unique_id)
            await caches.outputs.ensure_subcache_for(unique_id, new_ids)
            await caches.objects.ensure_subcache_for(unique_id, new_ids)
            links = [tuple(link) for link in result["result"]]
            for from_id, socket in links:
                execution_list.add_strong_link(from_id, socket, unique_id)
            pending_subgraph_results[unique_id] = links
            return ExecutionResult.PENDING, None, None
        if isinstance(result, dict):
            ui = result.get("ui", {})
            result = result.get("result", ())
        entry = CacheEntry(ui=ui, outputs=[[r] for r in result])
        await caches.outputs.set(unique_id, entry)
        execution_list.cache_update(unique_id, entry)
        if ui:
            ui_outputs[unique_id] = ui
    except comfy.model_management.InterruptProcessingException as iex:
        logging.info("Processing interrupted")
        return ExecutionResult.FAILURE, {"node_id": unique_id}, iex
    except Exception as ex:
        logging.error("!!! Exception during processing !!! %s", ex)
        return ExecutionResult.FAILURE, {"node_id": unique_id,
                                         "exception_message": str(ex)}, ex
    executed.add(unique_id)
    return ExecutionResult.SUCCESS, None, None


class PromptExecutor:
    def __init__(self, server, cache_type=False, cache_args=None):
        self.cache_args = cache_args
        self.cache_type = cache_type
        self.server = server
        self.reset()

    def reset(self):
        self.caches = CacheSet(cache_type=self.cache_type, cache_args=self.cache_args)
        self.status_messages = []
        self.success = True

    def add_message(self, event, data, broadcast: bool):
        self.status_messages.append((event, data))

    def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        asyncio.run(self.execute_async(prompt, prompt_id, extra_data, execute_outputs))

    async def execute_async(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        nodes.interrupt_processing(False)
        self.status_messages = []
        self.add_message("execution_start", {"prompt_id": prompt_id}, broadcast=False)
        ram_headroom = int(self.cache_args["ram"] * (1024 ** 3))
        two_values = "ram_inactive" in self.cache_args  # 0.25.0 and later
        ram_inactive_headroom = int((self.cache_args.get("ram_inactive") or 0) * (1024 ** 3))
        release = self.caches.outputs.ram_release \
            if self.cache_type == CacheType.RAM_PRESSURE and two_values else None
        comfy.memory_management.set_ram_cache_release_state(release, ram_headroom)
        try:
            dynamic_prompt = DynamicPrompt(prompt)
            is_changed_cache = IsChangedCache(prompt_id, dynamic_prompt, self.caches.outputs)
            for cache in self.caches.all:
                await cache.set_prompt(dynamic_prompt, prompt.keys(), is_changed_cache)
                cache.clean_unused()
            executed = set()
            pending_subgraph_results = {}
            execution_list = ExecutionList(dynamic_prompt, self.caches.outputs)
            for node_id in execute_outputs:
                execution_list.add_node(node_id)
            while not execution_list.is_empty():
                node_id, error, ex = await execution_list.stage_node_execution()
                if error is not None:
                    self.success = False
                    break
                result, error, ex = await execute(
                    self.server, dynamic_prompt, self.caches, node_id, extra_data,
                    executed, prompt_id, execution_list, pending_subgraph_results, {}, {})
                self.success = result != ExecutionResult.FAILURE
                if result == ExecutionResult.FAILURE:
                    self.add_message("execution_error" if not isinstance(
                        ex, comfy.model_management.InterruptProcessingException)
                        else "execution_interrupted",
                        {"node_id": node_id, "exception": repr(ex)}, broadcast=False)
                    break
                if result == ExecutionResult.PENDING:
                    execution_list.unstage_node_execution()
                    continue
                execution_list.complete_node_execution()
                if self.cache_type == CacheType.RAM_PRESSURE and two_values:
                    self._release_after_node(release, ram_headroom, ram_inactive_headroom)
                elif self.cache_type == CacheType.RAM_PRESSURE:  # 0.3.7x
                    self.caches.outputs.poll(ram_headroom=self.cache_args["ram"])
            else:
                self.add_message("execution_success", {"prompt_id": prompt_id},
                                 broadcast=False)
        finally:
            comfy.memory_management.set_ram_cache_release_state(None, 0)

    @staticmethod
    def _release_after_node(release, ram_headroom, ram_inactive_headroom):
        """0.33.0 after every node: outputs of earlier prompts below the
        inactive threshold, then large active ones, pins and everything
        below the active headroom (psutil's available: the test's figure)."""
        release(ram_inactive_headroom)
        shortfall = ram_headroom - caching.virtual_memory_available()
        if shortfall > 0:
            shortfall -= release(ram_headroom, free_active=True,
                                 min_entry_size=RAM_CACHE_LARGE_INTERMEDIATE)
        if comfy.model_management.should_free_pins_for_ram_pressure(shortfall):
            freed = comfy.model_management.free_pins(shortfall + 512 * (1024 ** 2))
            if freed < shortfall:
                release(ram_headroom, free_active=True)
