"""``webgrad.nn.parallel``: ``DataParallel`` (one device) and ``DistributedDataParallel`` (processes).

``DistributedDataParallel`` is torch's: run one process per replica (``torchrun``),
call ``webgrad.distributed.init_process_group("gloo")``, wrap the model; parameters
and buffers start as rank 0's, and during backward the gradients are averaged over
the ranks in buckets, each bucket's all-reduce starting as soon as its gradients are
final so that communication overlaps the rest of backward. Without a process group
(a plain ``python train.py``) the wrapper is a world of one. As in PyTorch, the
wrapped model is ``.module`` and the wrapper's state dict keys start with ``module.``.

Example:
    >>> import webgrad.distributed as dist
    >>> dist.init_process_group("gloo")                      # under torchrun
    >>> model = nn.parallel.DistributedDataParallel(net)
    >>> model(x).sum().backward()                            # grads: the mean over ranks
"""
from __future__ import annotations

import contextlib
import os

from .. import distributed as dist
from ..autograd import LEAF, is_grad_enabled, no_grad
from ..ops import cat
from ..tensor import Tensor
from .modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1 << 20  # a small first bucket starts communication early (torch does the same)


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
    """Data-parallel training over the ranks of a process group (torch's arguments).

    ``bucket_cap_mb`` (25) sizes the gradient buckets; ``find_unused_parameters``
    lets a forward leave parameters out (their share of a bucket is zero);
    ``broadcast_buffers`` copies rank 0's buffers (BatchNorm's statistics) at
    every forward; ``no_sync()`` accumulates gradients locally until the next
    synchronised backward. ``device_ids`` may name one device.

    Example:
        >>> ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=4)
        >>> with ddp.no_sync():                 # gradient accumulation without communication
        ...     ddp(x1).sum().backward()
        >>> ddp(x2).sum().backward()            # reduces both steps' gradients
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, **kwargs):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module to wrap, got {type(module).__name__}")
        _check_devices("DistributedDataParallel", device_ids)
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.find_unused_parameters, self.static_graph = find_unused_parameters, static_graph
        self.broadcast_buffers, self.process_group = broadcast_buffers, process_group
        self.require_backward_grad_sync = True
        initialized = dist.is_available() and dist.is_initialized()
        world_size = os.environ.get("WORLD_SIZE", "1")
        if not initialized and (process_group is not None or (world_size.isdigit() and int(world_size) > 1)):
            raise RuntimeError(f"DistributedDataParallel: multi-process training (WORLD_SIZE={world_size}) needs "
                               f"the default process group: call webgrad.distributed.init_process_group('gloo') "
                               f"before wrapping the model")
        self.world_size = dist.get_world_size(process_group) if initialized else 1
        if self.world_size > 1:
            self._reducer = _Reducer(self, module, bucket_cap_mb)
            _broadcast_coalesced([*module.parameters(), *module.buffers()], process_group)

    def forward(self, *inputs, **kwargs):
        reducer = self.__dict__.get("_reducer")
        if reducer is not None and self.broadcast_buffers:
            _broadcast_coalesced(list(self.module.buffers()), self.process_group)
        out = self.module(*inputs, **kwargs)
        if reducer is not None:
            reducer.prepare(out if is_grad_enabled() and self.require_backward_grad_sync else None)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside the block accumulates gradients without reducing them."""
        previous, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


class _Bucket:
    def __init__(self, params):
        self.params = params
        self.ready: set[int] = set()
        self.unused: set[int] = set()
        self.work = None
        self.flat: Tensor | None = None


class _Reducer:
    """Averages the gradients of ``module``'s parameters over the ranks in buckets,
    launching bucket i's all-reduce once its gradients are final and every bucket
    before it is launched (every rank must issue the collectives in the same order)."""

    def __init__(self, ddp, module, bucket_cap_mb):
        self.ddp = ddp
        params = [p for p in module.parameters() if p.requires_grad]
        self.names = {id(p): name for name, p in module.named_parameters()}
        cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * (1 << 20))
        # Reverse registration order is roughly the order backward finishes gradients.
        self.buckets: list[_Bucket] = []
        group: list = []
        size = 0
        for p in reversed(params):
            limit = min(cap, _FIRST_BUCKET_BYTES) if not self.buckets else cap
            if group and (size + p.numel() * p.element_size() > limit
                          or (p.device, p.dtype) != (group[0].device, group[0].dtype)):
                self.buckets.append(_Bucket(group))
                group, size = [], 0
            group.append(p)
            size += p.numel() * p.element_size()
        if group:
            self.buckets.append(_Bucket(group))
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self.active = False
        self.next_launch = 0
        for p in params:
            p.register_post_accumulate_grad_hook(self.grad_ready)

    def prepare(self, output) -> None:
        """Start an iteration: ``output`` is the forward's result (None: no sync this time)."""
        # A backward that began reducing but left some parameters without gradients
        # (a forward alone, never differentiated, is fine).
        if self.active and any(b.ready - b.unused for b in self.buckets):
            missing = [self.names.get(id(p), "?") for b in self.buckets for p in b.params
                       if id(p) not in b.ready]
            self.active = False
            raise RuntimeError(f"DistributedDataParallel: the previous backward did not produce gradients for "
                               f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}, so their reduction "
                               f"never finished; pass find_unused_parameters=True when a forward may leave "
                               f"parameters out")
        for b in self.buckets:
            b.ready, b.unused, b.work, b.flat = set(), set(), None, None
        self.next_launch = 0
        self.active = output is not None
        if self.active and self.ddp.find_unused_parameters:
            reached = _leaves_reached(output)
            for b in self.buckets:
                b.unused = {id(p) for p in b.params if id(p) not in reached}
                b.ready |= b.unused
            self._launch_ready()

    def grad_ready(self, param) -> None:
        if not self.active:
            return
        bucket = self.bucket_of[id(param)]
        if id(param) in bucket.ready:
            raise RuntimeError(f"DistributedDataParallel: parameter {self.names.get(id(param), '?')} got its "
                               f"gradient twice in one iteration (two backward passes through one forward?); "
                               f"use no_sync() for all but the last")
        bucket.ready.add(id(param))
        self._launch_ready()

    def _launch_ready(self) -> None:
        while self.next_launch < len(self.buckets):
            bucket = self.buckets[self.next_launch]
            if len(bucket.ready) < len(bucket.params):
                return
            with no_grad():
                grads = [p.grad if p.grad is not None else p.new_zeros(p.shape) for p in bucket.params]
                bucket.flat = _flat(grads)
            bucket.work = dist.all_reduce(bucket.flat, group=self.ddp.process_group, async_op=True)
            self.next_launch += 1
        self._finish()

    def _finish(self) -> None:
        """Every bucket is launched: wait for them and write the averaged gradients."""
        self.active = False
        with no_grad():
            for bucket in self.buckets:
                bucket.work.wait()
                mean = bucket.flat / self.ddp.world_size
                offset = 0
                for p in bucket.params:
                    grad = mean[offset:offset + p.numel()].reshape(p.shape)
                    offset += p.numel()
                    if p.grad is not None:
                        p.grad.copy_(grad)
                    elif id(p) not in bucket.unused or bool(grad.abs().max() > 0):  # used on some rank
                        p.grad = grad.clone()
                bucket.work, bucket.flat = None, None


def _flat(tensors):
    return cat([t.reshape(-1) for t in tensors])


def _broadcast_coalesced(tensors, group) -> None:
    """Copy rank 0's ``tensors`` into every rank's, one broadcast per device and dtype."""
    by_kind: dict = {}
    for t in tensors:
        by_kind.setdefault((t.device, t.dtype), []).append(t)
    with no_grad():
        for same in by_kind.values():
            flat = _flat(same)
            dist.broadcast(flat, src=0, group=group)
            offset = 0
            for t in same:
                t.copy_(flat[offset:offset + t.numel()].reshape(t.shape))
                offset += t.numel()


def _leaves_reached(output) -> set[int]:
    """ids of the leaf tensors the autograd graph of ``output`` (tensors, possibly nested) reaches."""
    roots, stack = [], [output]
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            roots.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    leaves, seen = {id(t) for t in roots if t._node is None}, set()
    nodes = [t._node for t in roots if t._node is not None]
    while nodes:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for t, edge in zip(node.inputs or (), node.edges):
            if edge is LEAF:
                leaves.add(id(t))
            elif edge is not None:
                nodes.append(edge)
    return leaves
