"""Where this package plugs into ComfyUI, all at import time (custom nodes
load before the prompt worker starts):

  execution.PromptExecutor.__init__  find the executor, open the page
  execution.PromptExecutor.execute   hold exec_lock, count prompts, publish;
                                     the executor running prompts is ComfyUI's
  execution.PromptExecutor.reset     hold exec_lock, publish the new cache
  execution.execute                  safe point between nodes; remember the
                                     running node and the execution list
  execution.get_output_data          the node window (window.py): open while
                                     the node's own code runs, so the
                                     serving thread may evict then
  comfy.utils.set_progress_bar_global_hook
                                     wrap the hook main.py installs: a safe
                                     point at every sampling step
  comfy.utils.load_torch_file        a model file about to be read: the
                                     load is announced to the agent, which
                                     makes room before it runs (models.py)
  comfy.sd.CLIP.__init__, comfy.sd.VAE.__init__,
  comfy.model_base.BaseModel.load_model_weights
                                     safe points inside a model load
  comfy.model_management.load_models_gpu
  comfy.memory_management.extra_ram_release (newer versions)
                                     safe points where RAM spikes while
                                     models are moved or pinned
  comfy.model_management.free_memory, cleanup_models
                                     with those two, under the manager's
                                     lock: the serving thread drops a model
                                     inside a node only while none runs
  comfy.model_management.free_pins   (0.25.0 and newer) the pinned-memory
                                     entries follow ComfyUI's own frees

Nothing here may let an exception escape into ComfyUI's worker thread except
InterruptProcessingException: a worker thread that dies leaves a server that
answers HTTP but runs nothing.
"""
import functools
import inspect
import logging
import threading

from . import compat
from .bridge import BRIDGE

log = logging.getLogger("ramcache")

_MARK = "__ramcache_wrapped__"


def _guard(where, fn, *args):
    """Run one of our own steps; swallow everything but an interrupt."""
    try:
        fn(*args)
    except BRIDGE.interrupt_types:
        raise
    except Exception:
        BRIDGE.say_once("err-" + where, logging.ERROR,
                        "error at %s (further ones not logged)", where)
        log.debug("ramcache: error at %s", where, exc_info=True)


def _wrap_init(orig):
    @functools.wraps(orig)
    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        _guard("executor capture", BRIDGE.attach, self)
        if BRIDGE.owns(self):
            _guard("first publish", _locked_publish)
    setattr(__init__, _MARK, True)
    return __init__


def _locked_publish():
    with BRIDGE.exec_lock, BRIDGE.window.lock:
        BRIDGE.adopt()
        BRIDGE.publish()


def _adopt_and_publish():
    with BRIDGE.window.lock:
        BRIDGE.adopt()
        BRIDGE.publish()


def _enter_prompt():
    BRIDGE.exec_thread = threading.get_ident()
    BRIDGE.prompts += 1
    BRIDGE.prompt_started = True
    BRIDGE.adopt()
    _check_cache_args()


def _leave_prompt():
    with BRIDGE.window.lock:
        BRIDGE.running = BRIDGE.dynprompt = BRIDGE.execution_list = None
    BRIDGE.safe_point(republish=True)


def _wrap_execute_method(orig):
    @functools.wraps(orig)
    def execute(self, *args, **kwargs):
        if not BRIDGE.owns(self) and not BRIDGE.in_prompt:
            # a prompt run outside any other is the prompt worker's: follow
            # it even if another executor was built after it
            _guard("executor capture", BRIDGE.attach, self)
        if not BRIDGE.owns(self):
            return orig(self, *args, **kwargs)
        with BRIDGE.exec_lock:
            _guard("prompt start", _enter_prompt)
            BRIDGE.in_prompt = True
            try:
                return orig(self, *args, **kwargs)
            finally:
                BRIDGE.in_prompt = False
                _guard("prompt end", _leave_prompt)
    setattr(execute, _MARK, True)
    return execute


def _wrap_reset(orig):
    @functools.wraps(orig)
    def reset(self, *args, **kwargs):
        if not BRIDGE.owns(self):  # being built, or not ComfyUI's
            return orig(self, *args, **kwargs)
        with BRIDGE.exec_lock:
            r = orig(self, *args, **kwargs)
            _guard("reset", _adopt_and_publish)
            return r
    setattr(reset, _MARK, True)
    return reset


# execution.execute(server, dynprompt, caches, current_item, extra_data,
#                   executed, prompt_id, execution_list, ...)
def _node_args(args, kwargs):
    def arg(i, name):
        if name in kwargs:
            return kwargs[name]
        return args[i] if len(args) > i else None
    return (arg(1, "dynprompt"), arg(2, "caches"), arg(3, "current_item"),
            arg(7, "execution_list"))


def _before_node(args, kwargs):
    dynprompt, caches, node_id, execution_list = _node_args(args, kwargs)
    if not BRIDGE.owns_caches(caches):
        return  # a sub-workflow's executor, not ComfyUI's
    # The execution list first: its pending nodes and the staged one must be
    # protected already at this, the widest safe point.
    with BRIDGE.window.lock:
        BRIDGE.dynprompt = dynprompt
        BRIDGE.execution_list = execution_list
        BRIDGE.running = None
    BRIDGE.safe_point(republish=True)
    if BRIDGE.prompt_started:  # the cache just moved to this prompt
        BRIDGE.prompt_started = False
        BRIDGE.settle()
    BRIDGE.node_started()
    with BRIDGE.window.lock:
        BRIDGE.running = node_id


def _after_node(args, kwargs):
    _, caches, node_id, _ = _node_args(args, kwargs)
    if BRIDGE.owns_caches(caches):
        try:
            BRIDGE.node_ended(node_id)
        finally:
            with BRIDGE.window.lock:
                BRIDGE.running = None


def _wrap_node_execute(orig):
    if inspect.iscoroutinefunction(orig):
        @functools.wraps(orig)
        async def execute(*args, **kwargs):
            _guard("before node", _before_node, args, kwargs)
            try:
                return await orig(*args, **kwargs)
            finally:
                _guard("after node", _after_node, args, kwargs)
    else:
        @functools.wraps(orig)
        def execute(*args, **kwargs):
            _guard("before node", _before_node, args, kwargs)
            try:
                return orig(*args, **kwargs)
            finally:
                _guard("after node", _after_node, args, kwargs)
    setattr(execute, _MARK, True)
    return execute


# execution.get_output_data(prompt_id, unique_id, obj, input_data_all, ...)
def _open_window(args, kwargs):
    unique_id = kwargs.get("unique_id", args[1] if len(args) > 1 else None)
    if BRIDGE.in_prompt and BRIDGE.on_executor_thread() and \
            unique_id is not None and unique_id == BRIDGE.running:
        BRIDGE.window.open(unique_id)


def _wrap_output_data(orig):
    """The node window: from right before the node's function runs to right
    after it returns (its outputs are not in the cache yet)."""
    if not inspect.iscoroutinefunction(orig):
        @functools.wraps(orig)
        def get_output_data(*args, **kwargs):
            _guard("node window", _open_window, args, kwargs)
            try:
                return orig(*args, **kwargs)
            finally:
                BRIDGE.window.close()
    else:
        @functools.wraps(orig)
        async def get_output_data(*args, **kwargs):
            _guard("node window", _open_window, args, kwargs)
            try:
                return await orig(*args, **kwargs)
            finally:
                BRIDGE.window.close()
    setattr(get_output_data, _MARK, True)
    return get_output_data


def _step():
    if BRIDGE.pending():
        BRIDGE.safe_point(republish=False)


def wrap_progress_hook(hook):
    """A progress hook that first serves commands, then calls hook."""
    if hook is None or getattr(hook, _MARK, False):
        return hook

    @functools.wraps(hook)
    def progress(*args, **kwargs):
        _guard("sampling step", _step)
        return hook(*args, **kwargs)
    setattr(progress, _MARK, True)
    return progress


def _wrap_safe_point(where):
    """A wrapper serving pending commands before a RAM-hungry call (a node
    with no progress bar would otherwise hold them until it ends)."""
    def wrap(orig):
        @functools.wraps(orig)
        def call(*args, **kwargs):
            _guard(where, _step)
            return orig(*args, **kwargs)
        setattr(call, _MARK, True)
        return call
    return wrap


def _wrap_file_load(orig):
    """comfy.utils.load_torch_file(path, ...): commands served, then the
    load announced (and room made) before the file is read."""
    @functools.wraps(orig)
    def load_torch_file(*args, **kwargs):
        _guard("model file load", _step)
        path = kwargs.get("ckpt", args[0] if args else None)
        _guard("model file load", BRIDGE.before_load, path)
        return orig(*args, **kwargs)
    setattr(load_torch_file, _MARK, True)
    return load_torch_file


def _wrap_model_manager(where):
    """A safe point before ComfyUI's own model loading, and a mark while it
    runs: it walks its loaded-model list, so no unload of ours then."""
    def wrap(orig):
        @functools.wraps(orig)
        def call(*args, **kwargs):
            _guard(where, _step)
            with BRIDGE.mm_lock:
                BRIDGE.mm_busy += 1
                try:
                    return orig(*args, **kwargs)
                finally:
                    BRIDGE.mm_busy -= 1
        setattr(call, _MARK, True)
        return call
    return wrap


def _wrap_locked(name):
    """A wrapper holding BRIDGE's lock @name around the call:
    - "exec_lock" for ComfyUI's own unloads outside a prompt (its worker's
      periodic cleanup, the /free route's unload_all_models), as the
      serving thread holds it when it unloads a model between prompts: the two
      never edit the loaded-model list at once;
    - "mm_lock" for its other walks and edits of that list (free_memory,
      and cleanup_models, which its finalizer runs when a model goes): the
      serving thread drops a model inside a node only with it."""
    def wrap(orig):
        @functools.wraps(orig)
        def call(*args, **kwargs):
            with getattr(BRIDGE, name):
                return orig(*args, **kwargs)
        setattr(call, _MARK, True)
        return call
    return wrap


def _wrap_free_pins(orig):
    """ComfyUI's free_pins (its own release, or a command's): the pin
    entries on the page follow at once."""
    @functools.wraps(orig)
    def free_pins(*args, **kwargs):
        try:
            return orig(*args, **kwargs)
        finally:
            _guard("pins freed", BRIDGE.refresh_pins)
    setattr(free_pins, _MARK, True)
    return free_pins


def _wrap_set_hook(orig):
    @functools.wraps(orig)
    def set_progress_bar_global_hook(function):
        return orig(wrap_progress_hook(function))
    setattr(set_progress_bar_global_hook, _MARK, True)
    return set_progress_bar_global_hook


def _check_cache_args():
    """Say once how ComfyUI's own RAM policy is set, when the agent is here."""
    ex = BRIDGE.executor() if BRIDGE.executor else None
    if ex is None or not BRIDGE.agent_alive():
        return
    cache_args = getattr(ex, "cache_args", None)
    said = compat.advice(compat.family(cache_args), compat.kind(BRIDGE.outputs()),
                         cache_args if isinstance(cache_args, dict) else {})
    if said is not None:
        BRIDGE.say_once("args", logging.WARNING if said[0] == "warning" else logging.INFO,
                        "%s", said[1])


def _patch(owner, name, wrapper):
    """Wrap owner.name once; its dotted name goes to BRIDGE.hooks (shown in
    the status) when it exists in this ComfyUI."""
    orig = getattr(owner, name, None)
    if orig is None:
        return False
    where = f"{getattr(owner, '__module__', None) or ''}.{owner.__name__}" \
        if isinstance(owner, type) else owner.__name__
    dotted = f"{where.lstrip('.')}.{name}"
    if dotted not in BRIDGE.hooks:
        BRIDGE.hooks.append(dotted)
    if not getattr(orig, _MARK, False):
        setattr(owner, name, wrapper(orig))
    return True


def _install_model_hooks():
    """Safe points inside model loads and around ComfyUI's model manager
    (each where this version has it)."""
    try:
        import comfy.model_management as mm
        BRIDGE.mm = mm
        _patch(mm, "load_models_gpu", _wrap_model_manager("model load"))
        _patch(mm, "free_memory", _wrap_locked("mm_lock"))
        _patch(mm, "cleanup_models", _wrap_locked("mm_lock"))
        _patch(mm, "free_pins", _wrap_free_pins)  # 0.25.0 and newer
        _patch(mm, "cleanup_models_gc", _wrap_locked("exec_lock"))
        _patch(mm, "unload_all_models", _wrap_locked("exec_lock"))
    except Exception:
        pass
    try:
        import comfy.memory_management as cmm
        _patch(cmm, "extra_ram_release", _wrap_model_manager("extra_ram_release"))
    except Exception:
        pass  # versions before it
    try:
        import comfy.sd
        import comfy.model_base
        _patch(comfy.sd.CLIP, "__init__", _wrap_safe_point("text encoder build"))
        _patch(comfy.sd.VAE, "__init__", _wrap_safe_point("VAE build"))
        _patch(comfy.model_base.BaseModel, "load_model_weights",
               _wrap_safe_point("model weights load"))
    except Exception:
        pass


def install():
    """Patch ComfyUI; False (and one log line) when it is not there."""
    try:
        import execution
        import comfy.utils
    except Exception as e:
        log.warning("ramcache: ComfyUI modules not importable (%s); not installed", e)
        return False
    try:
        import comfy.model_management as mm
        BRIDGE.interrupt_types = (mm.InterruptProcessingException,)
    except Exception:
        BRIDGE.interrupt_types = ()
    pe = getattr(execution, "PromptExecutor", None)
    if pe is None:
        log.warning("ramcache: execution.PromptExecutor not found; not installed")
        return False
    _patch(pe, "__init__", _wrap_init)
    _patch(pe, "execute", _wrap_execute_method)
    _patch(pe, "reset", _wrap_reset)
    if not _patch(execution, "execute", _wrap_node_execute):
        log.info("ramcache: no execution.execute here; safe points only "
                 "at sampling steps and between prompts")
    elif not _patch(execution, "get_output_data", _wrap_output_data):
        log.info("ramcache: no execution.get_output_data here; commands wait "
                 "for a safe point of the running node")
    _patch(comfy.utils, "set_progress_bar_global_hook", _wrap_set_hook)
    _patch(comfy.utils, "load_torch_file", _wrap_file_load)
    _install_model_hooks()
    current = getattr(comfy.utils, "PROGRESS_BAR_HOOK", None)
    if current is not None and not getattr(current, _MARK, False):
        comfy.utils.PROGRESS_BAR_HOOK = wrap_progress_hook(current)
    return True
