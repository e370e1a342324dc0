"""The parts of ComfyUI the package relies on, found by reading source
files with ast (nothing is imported): used on the stand-in by
test_standin_api.py and on real checkouts by real_comfyui.py, so the
stand-in keeps matching what the real versions have.

Each item: (file, class or None, name, since) where since is None for
every version run, or the first kind of version that has it ("ram" for
v0.3.7x and newer, "newest" for the two-value --cache-ram versions).
"""
import ast
import os

ITEMS = [
    ("execution.py", "PromptExecutor", "__init__", None),
    ("execution.py", "PromptExecutor", "execute", None),
    ("execution.py", "PromptExecutor", "reset", None),
    ("execution.py", "PromptExecutor", "caches", None),
    ("execution.py", "PromptExecutor", "cache_type", None),
    ("execution.py", "PromptExecutor", "cache_args", "ram"),
    ("execution.py", None, "execute", None),
    ("execution.py", None, "get_output_data", None),
    ("execution.py", None, "CacheType", None),
    ("execution.py", None, "IsChangedCache", None),
    ("comfy/utils.py", None, "set_progress_bar_global_hook", None),
    ("comfy/utils.py", None, "PROGRESS_BAR_HOOK", None),
    ("comfy/utils.py", None, "ProgressBar", None),
    ("comfy/utils.py", None, "load_torch_file", None),
    ("comfy/model_management.py", None, "InterruptProcessingException", None),
    ("comfy/model_management.py", None, "throw_exception_if_processing_interrupted", None),
    ("comfy/model_management.py", None, "load_models_gpu", None),
    ("comfy/model_management.py", None, "free_pins", "newest"),
    ("comfy/model_management.py", None, "current_loaded_models", None),
    ("comfy/model_management.py", None, "free_memory", None),
    ("comfy/model_management.py", None, "cleanup_models_gc", None),
    ("comfy/model_management.py", None, "unload_all_models", None),
    ("comfy/model_management.py", "LoadedModel", "model_unload", None),
    ("comfy/sd.py", "CLIP", "__init__", None),
    ("comfy/sd.py", "CLIP", "patcher", None),
    ("comfy/sd.py", "VAE", "__init__", None),
    ("comfy/sd.py", "VAE", "patcher", None),
    ("comfy/model_base.py", "BaseModel", "load_model_weights", None),
    ("comfy/memory_management.py", None, "extra_ram_release", "newest"),
    ("comfy/memory_management.py", None, "set_ram_cache_release_state", "newest"),
    ("comfy_execution/caching.py", "BasicCache", "cache", None),
    ("comfy_execution/caching.py", "BasicCache", "subcaches", None),
    ("comfy_execution/caching.py", "BasicCache", "cache_key_set", None),
    ("comfy_execution/caching.py", "BasicCache", "set_prompt", None),
    ("comfy_execution/caching.py", "CacheKeySet", "keys", None),
    ("comfy_execution/caching.py", "CacheKeySet", "get_data_key", None),
    ("comfy_execution/caching.py", "HierarchicalCache", "_get_cache_for", None),
    ("comfy_execution/caching.py", "LRUCache", "generation", None),
    ("comfy_execution/caching.py", "LRUCache", "used_generation", None),
    ("comfy_execution/caching.py", "LRUCache", "children", None),
    ("comfy_execution/caching.py", "RAMPressureCache", "timestamps", "ram"),
    ("comfy_execution/caching.py", "RAMPressureCache", "ram_release", "newest"),
    ("comfy_execution/caching.py", "NullCache", None, "ram"),
    ("comfy_execution/graph.py", "DynamicPrompt", "get_node", None),
    ("comfy_execution/graph.py", "ExecutionList", "staged_node_id", None),
    ("comfy_execution/graph.py", "ExecutionList", "execution_cache", "ram"),
    ("server.py", "PromptServer", "instance", None),
    ("server.py", "PromptServer", "routes", None),
]
# execution.execute(server, dynprompt, caches, current_item, extra_data,
#                   executed, prompt_id, execution_list, ...): hooks.py
# reads these by position.
EXECUTE_PARAMS = {"dynprompt": 1, "caches": 2, "current_item": 3, "execution_list": 7}
ORDER = {None: 0, "ram": 1, "newest": 2}


class Source:
    """Top-level names, classes with their methods and self.X attributes,
    and the parameter lists of top-level functions, of one file."""

    def __init__(self, path):
        self.names, self.classes, self.params = set(), {}, {}
        if not os.path.exists(path):
            self.missing = True
            return
        self.missing = False
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.names.add(node.name)
                self.params[node.name] = [a.arg for a in node.args.args]
            elif isinstance(node, ast.ClassDef):
                self.names.add(node.name)
                self.classes[node.name] = self._members(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.names.add(t.id)

    @staticmethod
    def _members(cls):
        out = set()
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                out.add(node.attr)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == cls.name:
                out.add(node.attr)  # PromptServer.instance = self
        for node in cls.body:
            if isinstance(node, ast.Assign):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return out


def inventory(root):
    """{(file, class, name): bool} and the execute() parameter check."""
    files = {}
    have = {}
    for f, cls, name, _ in ITEMS:
        src = files.get(f) or files.setdefault(f, Source(os.path.join(root, f)))
        if cls is None:
            ok = name in src.names
        elif name is None:
            ok = cls in src.classes
        else:
            ok = name in src.classes.get(cls, ()) or any(
                name in members for c, members in src.classes.items()
                if c != cls and cls in _bases(root, f, c))
        have[(f, cls, name)] = ok
    params = files["execution.py"].params.get("execute", [])
    execute_ok = all(len(params) > i and params[i] == p for p, i in EXECUTE_PARAMS.items())
    return have, execute_ok, params


def _bases(root, f, cls):
    """Base class names of cls in file f (one level), for members a class
    inherits (LRUCache.cache comes from BasicCache)."""
    tree = ast.parse(open(os.path.join(root, f), encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [b.id for b in node.bases if isinstance(b, ast.Name)]
    return []


def compare(real_root, standin_root, family):
    """Problems as strings: what the package needs that the real checkout
    lacks (for its family), and what the real checkout has that the
    stand-in lacks."""
    level = {"no --cache-ram": 0, "one-value --cache-ram": 1, "two-value --cache-ram": 2}[family]
    real, real_exec, real_params = inventory(real_root)
    stand, stand_exec, _ = inventory(standin_root)
    problems = []
    for f, cls, name, since in ITEMS:
        label = f"{f}: {'.'.join(x for x in (cls, name) if x)}"
        expected = ORDER[since] <= level
        if expected and not real[(f, cls, name)]:
            problems.append(f"real ComfyUI lacks {label}")
        if real[(f, cls, name)] and not stand[(f, cls, name)]:
            problems.append(f"the stand-in lacks {label}")
    if not real_exec:
        problems.append(f"real execution.execute takes {real_params}")
    if not stand_exec:
        problems.append("the stand-in's execution.execute takes other parameters")
    return problems
