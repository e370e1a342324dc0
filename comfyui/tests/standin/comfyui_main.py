"""What ComfyUI's main.py does around a custom node: load it from a folder
(module name = folder name, like nodes.load_custom_node), install the
progress hook (hijack_progress), and run the prompt worker thread."""
import importlib.util
import os
import queue
import sys
import threading

import comfy.model_management
import comfy.utils
import execution
import nodes


class Server:
    def __init__(self):
        self.client_id = None
        self.last_node_id = None
        self.last_prompt_id = None
        self.progress = []


def load_custom_node(path):
    name = os.path.basename(os.path.normpath(path))
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    nodes.NODE_CLASS_MAPPINGS.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
    return module


def hijack_progress(server):
    def hook(value, total, preview_image, prompt_id=None, node_id=None):
        comfy.model_management.throw_exception_if_processing_interrupted()
        server.progress.append((node_id or server.last_node_id, value, total))
    comfy.utils.set_progress_bar_global_hook(hook)


class Worker:
    """prompt_worker: builds the PromptExecutor on its own thread."""

    def __init__(self, server, cache_type, cache_args):
        self.q = queue.Queue()
        self.done = queue.Queue()
        self.server = server
        self.executor = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(cache_type, cache_args),
                                       daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self, cache_type, cache_args):
        self.executor = execution.PromptExecutor(self.server, cache_type=cache_type,
                                                 cache_args=cache_args)
        self.ready.set()
        while True:
            item = self.q.get()
            if item is None:
                return
            if item == "reset":
                self.executor.reset()
                self.done.put(True)
                continue
            prompt, prompt_id, outputs = item
            self.executor.execute(prompt, prompt_id, {}, outputs)
            self.done.put((self.executor.success, list(self.executor.status_messages)))

    def run(self, prompt, outputs, prompt_id="p", timeout=60):
        self.q.put((prompt, prompt_id, outputs))
        return self.done.get(timeout=timeout)

    def reset(self):
        self.q.put("reset")
        return self.done.get(timeout=10)

    def stop(self):
        self.q.put(None)
        self.thread.join(10)
