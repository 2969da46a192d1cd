"""``Module``: the base class of every layer, as in PyTorch.

Assigning a ``Parameter``, a ``Module`` or (through ``register_buffer``) a
tensor as an attribute registers it, so ``parameters()``, ``state_dict()``,
``to()`` and ``train()`` reach every piece of a nested model.
"""
from __future__ import annotations

import functools
import inspect
import linecache
import types
from collections import OrderedDict, namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import dtypes
from ...autograd import no_grad
from ...hooks import RemovableHandle
from ...ops import registry as _registry
from ...tensor import Tensor
from ..parameter import Parameter

# Named as torch's reprs it, IncompatibleKeys(missing_keys=..., unexpected_keys=...); mypy wants the names equal.
_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])  # type: ignore[name-match]


# Architecture records (nn/arch.py) rebuild a model from its constructors' arguments: every
# subclass records them here, at class creation.
def record_init_args(init):
    """Wrap a Module subclass's ``__init__`` so the outermost call stores its arguments."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if "_init_args" not in self.__dict__:  # super().__init__(...) calls must not overwrite it
            object.__setattr__(self, "_init_args", (args, kwargs))
        init(self, *args, **kwargs)
    __init__._records_init_args = True  # type: ignore[attr-defined]
    return __init__


def on_subclass(cls) -> None:
    """Called by ``Module.__init_subclass__``: record constructor arguments, and keep the lines of a
    class defined from a string (the playground) while they are still in ``linecache`` (the next
    run of the playground replaces them)."""
    if "__init__" in cls.__dict__:
        cls.__init__ = record_init_args(cls.__dict__["__init__"])
    for function in class_functions(cls):
        filename = function.__code__.co_filename
        if filename.startswith("<") and filename in linecache.cache:
            cls._webgrad_source_lines = linecache.getlines(filename)
        break


def class_functions(cls):
    """The plain functions defined in ``cls`` (unwrapped: ``__init__`` is wrapped by ``record_init_args``)."""
    for value in vars(cls).values():
        function = inspect.unwrap(getattr(value, "__func__", value))
        if isinstance(function, types.FunctionType):
            yield function


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _swap_data(t: Tensor, new: Tensor) -> None:
    """Make ``t`` hold ``new``'s data (dtype, device) while staying the same object,
    so optimizers holding ``t`` keep working after ``module.to(...)``."""
    if new is t:
        return
    t._data, t.shape, t.dtype, t.device = new._data, new.shape, new.dtype, new.device
    t._bump_version()


def _prepare_value(key: str, value, target: Tensor, assign: bool):
    """``(converted value, None)`` ready to write into ``target``, or ``(None, problem)``."""
    if isinstance(value, np.ndarray):
        from ...creation import tensor
        try:
            value = tensor(value)
        except (TypeError, ValueError) as error:
            return None, f'While copying the parameter named "{key}", could not convert the numpy array: {error}'
    if not isinstance(value, Tensor):
        return None, (f'While copying the parameter named "{key}", expected a Tensor '
                      f"but got {type(value).__name__}.")
    if tuple(value.shape) != tuple(target.shape):
        return None, (f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                      f"from checkpoint, the shape in current model is {tuple(target.shape)}.")
    try:
        value = value.detach()
        if value.device != target.device:
            value = value.to("cpu")  # convert where every dtype exists, then move
        if not assign:
            value = value.to(target.dtype)
        value = value.to(target.device)
        # A copy, so the value is the module's alone (and a later write cannot change it).
        return (value.clone() if assign else value), None
    except (TypeError, ValueError, OverflowError, RuntimeError) as error:
        return None, (f'While copying the parameter named "{key}", whose dimensions in the model are '
                      f"{tuple(target.shape)} ({target.dtype.name} on {target.device}) and whose dimensions "
                      f"in the checkpoint are {tuple(value.shape)} ({value.dtype.name}), an exception "
                      f"occurred: {error}")


class Module:
    """Base class for all neural network layers; subclasses define ``forward``.

    Example:
        >>> class TwoLayer(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)
        ...     def forward(self, x):
        ...         return self.fc2(self.fc1(x).relu())
        >>> TwoLayer()(webgrad.randn(3, 4)).shape
        webgrad.Size([3, 2])
    """

    # Set in __init__ through object.__setattr__ (plain assignment would go through __setattr__ below).
    training: bool
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: OrderedDict[str, Module | None]
    _forward_hooks: OrderedDict[int, Callable[..., Any]]
    _forward_pre_hooks: OrderedDict[int, Callable[..., Any]]

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; "
                            f"Module.__init__ takes none")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        on_subclass(cls)  # remember constructor arguments (and source), so webgrad.store can rebuild models

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        if _registry.OBSERVERS:  # e.g. webgrad.compile guards the train/eval flag of every module that ran
            output = _registry.call("module", type(self).__name__, self, self.forward, args, kwargs)
        else:
            output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_hook(self, hook) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every forward; a non-None return replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        """Call ``hook(module, args)`` before every forward; a non-None return replaces the args."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    # -- registration ------------------------------------------------------------
    def _check_name(self, kind: str, name) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f'{kind} name can\'t be empty or contain ".", got: {name!r}')

    def register_parameter(self, name: str, param) -> None:
        """Add a parameter (or ``None``, a declared-but-absent parameter such as ``bias=False``)."""
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (e.g. BatchNorm's ``running_mean``).

        Persistent buffers are part of ``state_dict()``; non-persistent ones are not.
        """
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module) -> None:
        """Add a child module, reachable as ``self.<name>``."""
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._parameters, self._buffers)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(nn.Module or None expected)")
            self._modules[name] = value
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, *dicts) -> None:
        for d in dicts:
            d.pop(name, None)

    def __getattr__(self, name: str):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def get_submodule(self, target: str) -> "Module":
        """The module at a dotted path, e.g. ``model.get_submodule("encoder.layers.0")``."""
        module = self
        if target == "":
            return module
        for part in target.split("."):
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{module._get_name()} has no submodule `{part}` (looking up {target!r})")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        param = module._parameters.get(name)
        if param is None:  # unknown, or declared but absent (bias=False), as PyTorch says
            raise AttributeError(f"{module._get_name()} has no parameter `{name}`"
                                 + (" (it is None)" if name in module._parameters else ""))
        return param

    # -- iteration -----------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + "." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """Yield ``(name, parameter)`` pairs, e.g. ``("0.weight", Parameter)``; shared ones once."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        """Yield every parameter (of submodules too, unless ``recurse=False``)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """Yield ``(name, module)`` for this module and every descendant, depth first."""
        memo = set() if memo is None else memo
        stack = [(prefix, self)]  # explicit stack: deep models never hit the recursion limit
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in memo:
                    continue
                memo.add(id(module))
            yield name, module
            children = [(name + ("." if name else "") + child_name, child)
                        for child_name, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, module in self.named_modules():
            yield module

    # -- modes ---------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Switch to training mode (dropout active, batch norm uses batch statistics)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> "Module":
        """Switch to evaluation mode; same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad`` (to ``None``, or to zeros)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach()
                p.grad.zero_()

    # -- moving --------------------------------------------------------------------
    def _apply(self, fn) -> "Module":
        """Replace the data of every parameter, gradient and buffer by ``fn(tensor)``, in place."""
        with no_grad():
            for module in self.modules():
                for t in list(module._parameters.values()) + list(module._buffers.values()):
                    if t is None:
                        continue
                    _swap_data(t, fn(t))
                    if t.grad is not None:
                        t.grad = fn(t.grad)
        return self

    def apply(self, fn) -> "Module":
        """Call ``fn(module)`` on every submodule (children first, in order) and then on this one.

        Example:
            >>> model.apply(lambda m: nn.init.zeros_(m.bias) if isinstance(m, nn.Linear) else None)
        """
        stack = [(self, False)]  # post-order without recursion, as PyTorch's recursive apply
        while stack:
            module, children_done = stack.pop()
            if children_done:
                fn(module)
                continue
            stack.append((module, True))
            stack.extend((child, False) for child in reversed(list(module.children())))
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move parameters and buffers to a device and/or cast floating ones to a dtype, in place.

        Example:
            >>> model.to(webgrad.float64)   # same Parameter objects, new data
        """
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)  # accepted for PyTorch compatibility; moves are synchronous here
        if kwargs:
            raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, dtypes.DType) or a in (float, int, bool) or isinstance(a, np.dtype):
                dtype = dtypes.to_dtype(a)
            else:
                device = a
        if dtype is not None and not dtypes.to_dtype(dtype).is_floating_point:
            raise TypeError(f"Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t):
            if dtype is not None and t.dtype.is_floating_point:
                t = t.to(dtype=dtype)
            return t.to(device=device) if device is not None else t
        return self._apply(convert)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def float(self) -> "Module":
        return self.to(dtypes.float32)

    def double(self) -> "Module":
        return self.to(dtypes.float64)

    def half(self) -> "Module":
        return self.to(dtypes.float16)

    def bfloat16(self) -> "Module":
        return self.to(dtypes.bfloat16)

    def type(self, dtype) -> "Module":
        return self.to(dtypes.to_dtype(dtype))

    # -- state dict --------------------------------------------------------------------
    def _state_items(self, keep_vars=False):
        for prefix, module in self.named_modules(remove_duplicate=False):
            dot = prefix + "." if prefix else ""
            for name, p in module._parameters.items():
                if p is not None:
                    yield dot + name, (p if keep_vars else p.detach())
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers_set:
                    yield dot + name, (b if keep_vars else b.detach())

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Every parameter and persistent buffer by dotted name, e.g. ``"0.weight"``.

        The values are detached tensors sharing memory with the model (copy them
        to keep a snapshot that later training will not change).

        Example:
            >>> list(nn.Linear(2, 3).state_dict())
            ['weight', 'bias']
        """
        destination = OrderedDict() if destination is None else destination
        for key, value in self._state_items(keep_vars):
            destination[prefix + key] = value
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        Each value is converted as PyTorch's ``copy_`` converts: to the dtype and
        device of the parameter it replaces (a float64 or float16 checkpoint loads
        into a float32 model on any device). Everything is checked and converted
        before anything is written: missing and unexpected keys (both only when
        ``strict``), values that are not tensors, shape mismatches and values that
        cannot be converted (an int64 counter beyond 32 bits on WebGPU) raise one
        RuntimeError listing them all, and every parameter and buffer stays as it
        was. With ``assign=True`` the module takes the values' dtype (moved to the
        parameter's device) instead of copying into its own tensors.
        Returns ``(missing_keys, unexpected_keys)``.

        Example:
            >>> other.load_state_dict(model.state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        own = OrderedDict(self._state_items(keep_vars=True))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in own]
        problems, plan = [], []
        with no_grad():
            for key, target in own.items():
                if key in state_dict:
                    value, problem = _prepare_value(key, state_dict[key], target, assign)
                    if problem is None:
                        plan.append((target, value))
                    else:
                        problems.append(problem)
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        errors += problems
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors))
        # Only now write: every value already has its target's shape, dtype and device.
        with no_grad():
            for target, value in plan:
                if assign:
                    _swap_data(target, value)
                else:
                    target.copy_(value)
        return _IncompatibleKeys(missing, unexpected)

    # -- printing -------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside ``Name(...)`` in the repr; layers override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(module), 2) for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
