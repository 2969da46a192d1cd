"""The Optimizer base class: parameter groups, per-parameter state, state dicts.

Subclasses (``SGD``, ``Adam``, ``AdamW``, ``RMSprop``) give their defaults,
check their options and implement ``step`` as one fused kernel call per
parameter (see ``webgrad.optim.updates``). The layout of ``param_groups``,
``state`` and ``state_dict()`` is PyTorch's, so training loops port unchanged.
"""
from __future__ import annotations

import copy
import numbers
from collections import defaultdict

from ..autograd import enable_grad, no_grad
from ..ops import registry
from ..tensor import Tensor


class _RequiredParameter:
    """Marks an option that every parameter group must set (no default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def check_real(option: str, value) -> None:
    """Raise a TypeError unless ``value`` is a plain real number (not a bool or a Tensor)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{option} must be a real number, got {type(value).__name__} {value!r}")


def evaluate_closure(closure):
    """Run ``closure`` (which recomputes the loss) with gradients on; None without one."""
    if closure is None:
        return None
    with enable_grad():
        return closure()


class Optimizer:
    """Base class of all optimizers: ``param_groups`` with their options, and a ``state`` dict per parameter.

    Args:
        params: an iterable of Tensors, or of dicts ``{"params": [...], "lr": ...}``
            that give some groups their own options.
        defaults: the options a group gets when it does not set them.

    Example:
        >>> w = webgrad.tensor([1.0, 2.0], requires_grad=True)
        >>> b = webgrad.tensor([0.0], requires_grad=True)
        >>> opt = webgrad.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
        >>> [group["lr"] for group in opt.param_groups]
        [0.1, 0.5]
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got a Tensor of shape {tuple(params.shape)}; wrap it in a list")
        if isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs; use a list instead")
        try:
            param_groups = list(params)
        except TypeError:
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}") from None
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # -- options -------------------------------------------------------------------
    def _check_options(self, group: dict) -> None:
        """Raise ValueError/TypeError for an invalid option value. Subclasses override."""

    def _required_state(self, group: dict) -> tuple[str, ...]:
        """State entries a stepped parameter must have under ``group``'s options."""
        return ()

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (e.g. a new layer while fine-tuning).

        Example:
            >>> opt.add_param_group({"params": [new_weight], "lr": 1e-4})
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError(f"param_group must have a 'params' entry, got keys {sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs; use a list instead")
        else:
            params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but parameter {i} of the group "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (parameter {i}, shape "
                                 f"{tuple(p.shape)}); optimize the leaf tensors it was computed from")
            if not p.dtype.is_floating_point:
                raise TypeError(f"optimizer can only optimize floating point tensors, but parameter {i} "
                                f"is {tuple(p.shape)} {p.dtype.name}")

        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters; "
                             "list each parameter once")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self._check_options(group)
        self.param_groups.append(group)

    # -- the training loop -----------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None (default, frees memory) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                p.grad.detach_()
                with no_grad():
                    p.grad.zero_()

    def __init_subclass__(cls, **kwargs):
        """Each ``step`` a subclass defines is an "optimizer" range for the op registry's
        observers (webgrad.compile re-reads its updates' scalars, the profiler times it)."""
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = registry.observed("optimizer", f"Optimizer.step#{cls.__name__}.step")(cls.__dict__["step"])

    def step(self, closure=None):
        """Update every parameter that has a ``.grad``; ``closure`` recomputes and returns the loss."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    # -- saving and loading ---------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimizer's state as ``{"state": {index: {...}}, "param_groups": [...]}``.

        Parameters are referred to by their position across all groups (0, 1, ...),
        as in PyTorch. The result is a snapshot: tensors are copies, so later steps
        do not change it.

        Example:
            >>> webgrad.save({"optimizer": opt.state_dict()}, "checkpoint.safetensors")
        """
        index: dict[int, int] = {}
        param_groups = []
        for group in self.param_groups:
            packed = {key: copy.deepcopy(value) for key, value in group.items() if key != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            param_groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                entry = self.state.get(p)
                if entry:
                    state[index[id(p)]] = {name: _snapshot(value) for name, value in entry.items()}
        return {"state": state, "param_groups": param_groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state saved by ``state_dict()`` into this optimizer.

        The optimizer must have been built over parameters of the same shapes, in
        the same groups and order. Everything is checked before anything changes,
        so a state dict that does not fit raises and leaves the optimizer as it was.
        Loaded tensors are copied (cast to each parameter's dtype and device).
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict: expected the dict returned by state_dict(), "
                            f"got {type(state_dict).__name__}")
        missing = [key for key in ("state", "param_groups") if key not in state_dict]
        if missing:
            raise ValueError(f"load_state_dict: the state dict has no {missing} entries; expected the "
                             f"dict returned by optimizer.state_dict()")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, (list, tuple)) or not isinstance(saved_state, dict):
            raise ValueError("load_state_dict: 'param_groups' must be a list and 'state' a dict")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups: "
                             f"{len(saved_groups)} saved, {len(self.param_groups)} in this optimizer")

        id_map: dict[int, tuple[Tensor, int]] = {}
        new_groups = []
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            new_groups.append(self._load_group(i, group, saved, id_map))

        new_state: defaultdict = defaultdict(dict)
        for key, entry in saved_state.items():
            if isinstance(key, str) and key.isdigit():
                key = int(key)  # state dicts that went through JSON have string keys
            if key not in id_map:
                raise ValueError(f"load_state_dict: 'state' has an entry for parameter {key!r}, but the "
                                 f"saved param_groups only list parameters {sorted(id_map)}")
            param, group_index = id_map[key]
            if not isinstance(entry, dict):
                raise ValueError(f"load_state_dict: state of parameter {key} must be a dict, "
                                 f"got {type(entry).__name__}")
            new_entry = {name: _load_value(name, value, param, key) for name, value in entry.items()}
            lacking = [name for name in self._required_state(new_groups[group_index]) if name not in new_entry]
            if new_entry and lacking:
                raise ValueError(f"load_state_dict: state of parameter {key} has no {lacking}, which "
                                 f"{type(self).__name__} needs with these options; was the state dict "
                                 f"saved from a different optimizer?")
            new_state[param] = new_entry

        # Everything checked: now change the optimizer. Groups are updated in place so
        # references to them (held by LR schedulers or the user) stay valid.
        for group, new_group in zip(self.param_groups, new_groups):
            group.clear()
            group.update(new_group)
        self.state = new_state

    def _load_group(self, i: int, group: dict, saved, id_map: dict) -> dict:
        """Group ``i`` as loaded from ``saved``: the saved options over the current ones."""
        if not isinstance(saved, dict) or not isinstance(saved.get("params"), (list, tuple)):
            raise ValueError(f"load_state_dict: param_groups[{i}] must be a dict with a 'params' list")
        saved_ids = saved["params"]
        if len(saved_ids) != len(group["params"]):
            raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size "
                             f"of optimizer's group: param_groups[{i}] has {len(saved_ids)} parameters "
                             f"saved and {len(group['params'])} in this optimizer")
        for saved_id, p in zip(saved_ids, group["params"]):
            if isinstance(saved_id, bool) or not isinstance(saved_id, int):
                raise ValueError(f"load_state_dict: param_groups[{i}]['params'] must hold int indices, "
                                 f"got {saved_id!r}")
            if saved_id in id_map:
                raise ValueError(f"load_state_dict: parameter index {saved_id} appears twice in the "
                                 f"saved param_groups")
            id_map[saved_id] = (p, i)
        new_group = dict(group)  # options missing from an older save keep their current values
        for key, value in saved.items():
            if key == "params":
                continue
            value = copy.deepcopy(value)
            if isinstance(self.defaults.get(key), tuple) and isinstance(value, list):
                value = tuple(value)  # betas come back from a file as a list
            new_group[key] = value
        new_group["params"] = group["params"]
        try:
            self._check_options(new_group)
        except (TypeError, ValueError) as err:
            raise type(err)(f"load_state_dict: param_groups[{i}]: {err}") from None
        return new_group

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        lines.append(")")
        return "\n".join(lines)


def _snapshot(value):
    if isinstance(value, Tensor):
        with no_grad():
            return value.detach().clone()
    return copy.deepcopy(value)


def _load_value(name: str, value, param: Tensor, index):
    """One saved state entry, checked against its parameter and copied onto it."""
    if name == "step":
        # The step count stays a host number: it feeds the bias corrections as a
        # kernel attr and must never need a GPU readback. PyTorch saves a tensor.
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(f"load_state_dict: 'step' of parameter {index} must hold one number, "
                                 f"got shape {tuple(value.shape)}")
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
            raise ValueError(f"load_state_dict: 'step' of parameter {index} must be a count >= 0, "
                             f"got {value!r}")
        # Real promises __trunc__, not the __int__ that int() wants, though int, float, the numpy scalars and
        # Fraction all have it.
        return int(value) if float(value).is_integer() else float(value)  # type: ignore[call-overload]
    if isinstance(value, Tensor):
        if tuple(value.shape) != tuple(param.shape):
            raise ValueError(f"load_state_dict: state {name!r} of parameter {index} has shape "
                             f"{tuple(value.shape)} but the parameter has shape {tuple(param.shape)}")
        with no_grad():
            return value.detach().to(device=param.device, dtype=param.dtype).clone()
    return copy.deepcopy(value)
