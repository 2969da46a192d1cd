"""``webgrad.nn.parallel``: ``DataParallel`` and ``DistributedDataParallel`` for one process on one device.

webgrad has one device per process and no collective-communication backend, so
both wrappers run the wrapped module as it is (like PyTorch's wrappers with a
single device and a world of one process). What would need several processes —
a ``process_group``, ``WORLD_SIZE`` > 1 in the environment, or more than one
device id — raises a RuntimeError that says so, instead of silently training
each process alone. As in PyTorch, the wrapped model is ``.module`` and the
wrapper's state dict keys start with ``module.``.

Example:
    >>> from webgrad.nn.parallel import DistributedDataParallel as DDP
    >>> model = DDP(nn.Linear(4, 2))
    >>> model(webgrad.randn(3, 4)).shape
    webgrad.Size([3, 2])
    >>> raw_model = model.module
"""
from __future__ import annotations

import contextlib
import os

from .modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


def _check_devices(name, device_ids):
    if device_ids is not None and len(list(device_ids)) > 1:
        raise RuntimeError(f"{name}: device_ids={list(device_ids)} asks for several devices, but webgrad runs a "
                           f"model on one device per process; pass device_ids=None (or one id)")


class DataParallel(Module):
    """Run ``module`` on the one device it lives on (PyTorch splits the batch over several GPUs).

    Example:
        >>> model = nn.DataParallel(nn.Linear(4, 2))
        >>> model.module
        Linear(in_features=4, out_features=2, bias=True)
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected an nn.Module to wrap, got {type(module).__name__}")
        _check_devices("DataParallel", device_ids)
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """Data-parallel training with a world of one process: forward and backward are the module's own.

    Gradients need no all-reduce with one process, so training matches the
    unwrapped module step for step. ``no_sync()`` is accepted (it has nothing to
    skip). Several processes (``process_group``, ``WORLD_SIZE`` > 1) raise a
    RuntimeError: webgrad has no communication backend to average gradients.

    Example:
        >>> ddp = nn.parallel.DistributedDataParallel(model)
        >>> with ddp.no_sync():
        ...     ddp(x).sum().backward()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, **kwargs):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module to wrap, got {type(module).__name__}")
        world_size = os.environ.get("WORLD_SIZE", "1")
        if process_group is not None or (world_size.isdigit() and int(world_size) > 1):
            raise RuntimeError(f"DistributedDataParallel: multi-process training (process_group={process_group!r}, "
                               f"WORLD_SIZE={world_size}) is not supported: webgrad has no collective-"
                               f"communication backend. Run a single process (unset WORLD_SIZE) and the wrapper "
                               f"behaves as the plain module")
        _check_devices("DistributedDataParallel", device_ids)
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.find_unused_parameters, self.static_graph = find_unused_parameters, static_graph

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Skip gradient synchronisation inside the block (with one process there is none to skip)."""
        yield
