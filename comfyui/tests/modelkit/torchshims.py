"""What newer ComfyUI calls on torch >= 2 while loading a model and
sampling that Debian 12's torch 1.13 lacks, added with the semantics of
the torch version that introduced it, each only where missing:

- nn.Embedding(..., _freeze=False, device, dtype) (torch 2.1): comfy/ops.py
  (0.25.0, 0.33.0) passes _freeze positionally before device and dtype.
- Module.load_state_dict(state_dict, strict, assign=False) (torch 2.1):
  comfy/sd.py, model_base.py, sd1_clip.py (0.25.0, 0.33.0) pass assign;
  assign=True puts the state dict's own tensors into the module (wrapped
  as Parameters keeping the module's requires_grad), not copies.
- Tensor.nbytes and Tensor.itemsize (torch 2.1): model_management.py
  (0.25.0, 0.33.0) sizes modules and pinned buffers with them.
- torch.dtype.itemsize (torch 2.1): model_patcher.py (0.3.75 on) sizes
  the low-VRAM patch estimate with it.
- torch.compiler.is_compiling() (torch 2.3): comfy/ops.py (0.3.75 on)
  asks it before every op runs, model_management.py (0.25.0 on) before
  picking an offload stream; nothing is ever being compiled on a torch
  without a compiler, so it is False (and disable() leaves functions as
  they are).
"""
import ctypes
import gc
import inspect
import itertools
import sys
import types


def apply(torch):
    """Add every missing shim to @torch; the names added, in order."""
    added = []
    for name, present, add in SHIMS:
        if not present(torch):
            add(torch)
            added.append(name)
    return added


def _has_param(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def add_tensor_sizes(torch):
    """Tensor.nbytes (numel x element size: the view's bytes, not its
    storage's) and Tensor.itemsize."""
    torch.Tensor.nbytes = property(lambda self: self.numel() * self.element_size())
    torch.Tensor.itemsize = property(lambda self: self.element_size())


def add_dtype_itemsize(torch):
    """torch.dtype.itemsize. torch.dtype is a C type whose attributes
    Python code cannot set, so the property goes into the type's own
    dictionary and the type's attribute cache is invalidated."""
    sizes = {}

    def itemsize(dtype):
        if dtype not in sizes:
            sizes[dtype] = torch._utils._element_size(dtype)
        return sizes[dtype]
    type_dict = gc.get_referents(torch.dtype.__dict__)[0]
    type_dict["itemsize"] = property(itemsize)
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(torch.dtype))


def add_compiler(torch):
    """torch.compiler with is_compiling() and disable() as they behave in
    eager mode."""
    compiler = types.ModuleType("torch.compiler")
    compiler.__doc__ = "torch.compiler of a torch that cannot compile: eager mode only."
    compiler.is_compiling = lambda: False
    compiler.is_dynamo_compiling = lambda: False

    def disable(fn=None, recursive=True):
        return fn if fn is not None else (lambda f: f)
    compiler.disable = disable
    torch.compiler = sys.modules["torch.compiler"] = compiler


def add_embedding_freeze(torch):
    """nn.Embedding's torch 2.1 signature: _freeze between _weight and
    device; a frozen embedding's weight does not require grad."""
    original = torch.nn.Embedding.__init__

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        """torch 2.1's nn.Embedding.__init__."""
        original(self, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                 scale_grad_by_freq, sparse, _weight, device=device, dtype=dtype)
        if _freeze:
            self.weight.requires_grad_(False)
    torch.nn.Embedding.__init__ = __init__


def add_load_state_dict_assign(torch):
    """Module.load_state_dict(..., assign=) as in torch 2.1: assign=True
    marks every submodule's local metadata with assign_to_params_buffers
    (which module classes that load for themselves, such as ComfyUI's
    ops, read) and the default per-module loader then assigns."""
    module = torch.nn.Module
    load, load_local = module.load_state_dict, module._load_from_state_dict

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not assign:
            return load(self, state_dict, strict)
        return load(self, with_assign_metadata(self, state_dict), strict)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        """Assigns when load_state_dict(assign=True) marked this module."""
        if not local_metadata.get("assign_to_params_buffers", False):
            return load_local(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs)
        return assign_local(torch, self, state_dict, prefix, local_metadata, strict,
                            missing_keys, unexpected_keys, error_msgs)
    load_state_dict.__doc__ = load.__doc__
    module.load_state_dict = load_state_dict
    module._load_from_state_dict = _load_from_state_dict


def with_assign_metadata(root, state_dict):
    """A shallow copy of @state_dict whose _metadata (kept as it was)
    tells every submodule of @root to assign."""
    from collections import OrderedDict
    old = getattr(state_dict, "_metadata", None) or {}
    out = OrderedDict(state_dict)
    meta = OrderedDict(old)
    for name, _ in root.named_modules(remove_duplicate=False):
        meta[name] = dict(old.get(name, {}), assign_to_params_buffers=True)
    out._metadata = meta
    return out


def assign_local(torch, self, state_dict, prefix, local_metadata, strict,
                 missing_keys, unexpected_keys, error_msgs):
    """torch 2.1's Module._load_from_state_dict on its assign path: the
    pre-hooks, then each own parameter and persistent buffer replaced by
    the state dict's tensor (after the same checks as a copy), extra
    state, and the unexpected keys under @prefix."""
    for hook in self._load_state_dict_pre_hooks.values():
        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
    buffers = ((k, v) for k, v in self._buffers.items()
               if k not in self._non_persistent_buffers_set)
    local = {k: v for k, v in itertools.chain(self._parameters.items(), buffers) if v is not None}
    for name, param in local.items():
        key = prefix + name
        if key in state_dict:
            error = assign_one(torch, self, name, param, state_dict[key], key)
            if error:
                error_msgs.append(error)
        elif strict:
            missing_keys.append(key)
    load_extra_state(torch, self, state_dict, prefix, strict, missing_keys, unexpected_keys)
    if strict:
        extra = prefix + "_extra_state"
        for key in state_dict:
            if key.startswith(prefix) and key != extra:
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected_keys.append(key)


def assign_one(torch, self, name, param, value, key):
    """Put @value in place of parameter or buffer @name; an error message
    when it cannot be, else None."""
    if not torch.overrides.is_tensor_like(value):
        return (f'While copying the parameter named "{key}", expected torch.Tensor or '
                f"Tensor-like object from checkpoint but received {type(value)}")
    lazy = torch.nn.parameter.is_lazy(param)
    if not lazy and param.dim() == 0 and value.dim() == 1:
        value = value[0]
    if not lazy and value.shape != param.shape:
        return (f"size mismatch for {key}: copying a param with shape {value.shape} from "
                f"checkpoint, the shape in current model is {param.shape}.")
    with torch.no_grad():
        if isinstance(param, torch.nn.Parameter):
            if isinstance(value, torch.nn.Parameter):
                value.requires_grad_(param.requires_grad)
            else:
                value = torch.nn.Parameter(value, requires_grad=param.requires_grad)
        setattr(self, name, value)
    return None


def load_extra_state(torch, self, state_dict, prefix, strict, missing_keys, unexpected_keys):
    """A module's extra state, as the copying loader handles it."""
    key = prefix + "_extra_state"
    base = torch.nn.Module.set_extra_state
    if getattr(type(self), "set_extra_state", base) is not base:
        if key in state_dict:
            self.set_extra_state(state_dict[key])
        elif strict:
            missing_keys.append(key)
    elif strict and key in state_dict:
        unexpected_keys.append(key)


SHIMS = [
    ("Tensor.nbytes/itemsize", lambda t: hasattr(t.Tensor, "nbytes"), add_tensor_sizes),
    ("dtype.itemsize", lambda t: hasattr(t.float32, "itemsize"), add_dtype_itemsize),
    ("torch.compiler", lambda t: hasattr(t, "compiler"), add_compiler),
    ("Embedding(_freeze=)", lambda t: _has_param(t.nn.Embedding.__init__, "_freeze"),
     add_embedding_freeze),
    ("Module.load_state_dict(assign=)",
     lambda t: _has_param(t.nn.Module.load_state_dict, "assign"), add_load_state_dict_assign),
]
