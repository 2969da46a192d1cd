"""``webgrad.distributed``: torch.distributed's process groups and collectives on webgrad tensors.

The transport is torch's c10d with its gloo backend (TCP, cpu), a well-kept engine
that ``torchrun`` already launches; install it with ``pip install webgrad[distributed]``.
webgrad hands c10d its tensors' own memory on cpu (a numpy array seen as a torch
tensor, no copy) and one host copy per call on WebGPU (read back, reduce, upload)::

    # torchrun --standalone --nproc-per-node=2 train.py
    import webgrad, webgrad.distributed as dist
    dist.init_process_group("gloo")            # env:// from torchrun's RANK, WORLD_SIZE, MASTER_*
    t = webgrad.ones(3) * (dist.get_rank() + 1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)   # every rank now holds 3.0 (with 2 ranks)

Names and arguments are torch.distributed's. A rank that dies makes the others'
next collective fail (at once when its connection closes, else after the group's
``timeout``) with a RuntimeError that names the ranks that stopped answering.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import sys
import threading
import time
from typing import Any

import numpy as np

from . import creation
from .autograd import no_grad
from .ops import registry
from .tensor import Tensor

__all__ = ["ReduceOp", "Work", "is_available", "is_initialized", "is_torchelastic_launched", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend", "new_group", "barrier",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce", "reduce_scatter",
           "reduce_scatter_tensor", "send", "recv", "all_gather_object", "broadcast_object_list"]


class ReduceOp:
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values."""

    SUM = "SUM"
    AVG = "AVG"
    PRODUCT = "PRODUCT"
    MIN = "MIN"
    MAX = "MAX"
    BAND = "BAND"
    BOR = "BOR"
    BXOR = "BXOR"


def is_available() -> bool:
    """True where the c10d engine (torch) is installed: ``pip install webgrad[distributed]``."""
    return sys.platform != "emscripten" and importlib.util.find_spec("torch") is not None


def _c10d():
    if not is_available():
        raise RuntimeError("webgrad.distributed needs torch's c10d as its transport, and torch is not installed "
                           "here: pip install 'webgrad[distributed]' (in a browser page there are no processes "
                           "to connect)")
    import torch.distributed as c10d

    return c10d


def is_initialized() -> bool:
    return "torch.distributed" in sys.modules and _c10d().is_initialized()


def is_torchelastic_launched() -> bool:
    """True in a process started by ``torchrun``."""
    return "TORCHELASTIC_RUN_ID" in os.environ


def _timedelta(timeout, where):
    if timeout is None or isinstance(timeout, datetime.timedelta):
        return timeout
    if isinstance(timeout, (int, float)) and timeout > 0:
        return datetime.timedelta(seconds=timeout)
    raise TypeError(f"webgrad.distributed.{where}: timeout must be a datetime.timedelta or seconds > 0, "
                    f"got {timeout!r}")


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "",
                       pg_options=None, device_id=None) -> None:
    """Join the default process group (torch's arguments; ``init_method`` "env://" or "tcp://host:port").

    Only the "gloo" backend exists here: webgrad's tensors travel through host memory
    whatever their device, as torch's cpu tensors do.
    """
    if backend not in (None, "gloo", "cpu:gloo"):
        raise ValueError(f"webgrad.distributed.init_process_group: backend={backend!r} is not available; webgrad "
                         f"runs its collectives on c10d's 'gloo' backend (cpu and WebGPU tensors alike)")
    c10d = _c10d()
    if c10d.is_initialized():
        raise RuntimeError("webgrad.distributed.init_process_group: the default process group is already "
                           "initialized; call destroy_process_group() first")
    kwargs: dict[str, Any] = {"world_size": world_size, "rank": rank, "group_name": group_name}
    if timeout is not None:
        kwargs["timeout"] = _timedelta(timeout, "init_process_group")
    if store is None and init_method in (None, "env://") and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = _attempt_store(c10d, kwargs.get("timeout"))
        kwargs["rank"] = int(os.environ["RANK"]) if rank < 0 else rank
        kwargs["world_size"] = int(os.environ["WORLD_SIZE"]) if world_size < 0 else world_size
    if store is not None:
        kwargs["store"] = store
    else:
        kwargs["init_method"] = init_method
    c10d.init_process_group("gloo", **kwargs)
    _Heartbeat.start(c10d)


def _attempt_store(c10d, timeout):
    """torchrun's store, with keys of their own for each restart: torch shares the
    agent's store across ``--max-restarts`` attempts without telling them apart, and
    a restarted rank can read the dead attempt's addresses (pytorch issue 135712)."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    agent = c10d.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timeout or datetime.timedelta(minutes=5))
    return c10d.PrefixStore(f"webgrad/attempt_{attempt}", agent)


def destroy_process_group(group=None) -> None:
    c10d = _c10d()
    if group is None:
        _Heartbeat.stop()
    c10d.destroy_process_group(group)


def _require(name: str):
    c10d = _c10d()
    if not c10d.is_initialized():
        raise ValueError(f"webgrad.distributed.{name}: the default process group has not been initialized; "
                         f"call webgrad.distributed.init_process_group('gloo') first (torchrun sets its "
                         f"environment)")
    return c10d


def get_rank(group=None) -> int:
    return _require("get_rank").get_rank(group)


def get_world_size(group=None) -> int:
    return _require("get_world_size").get_world_size(group)


def get_backend(group=None) -> str:
    return str(_require("get_backend").get_backend(group))


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A process group of ``ranks`` (every rank must call this, in the same order)."""
    c10d = _require("new_group")
    return c10d.new_group(ranks=ranks, timeout=_timedelta(timeout, "new_group"), backend="gloo")


# -- tensors as c10d sees them ---------------------------------------------------
class _Exchange:
    """A webgrad tensor as a torch cpu tensor: its own memory on cpu when the layout
    allows (no copy), else a host copy that ``finish`` writes back into the tensor."""

    def __init__(self, tensor, where, writes: bool):
        import torch

        if not isinstance(tensor, Tensor):
            raise TypeError(f"webgrad.distributed.{where}: expected a webgrad.Tensor, got {type(tensor).__name__}")
        self.tensor, self.writes = tensor, writes
        if registry.OBSERVERS:  # inside webgrad.compile's trace: a graph break, never a replay without communication
            registry.host_read(tensor)
        data = tensor._data
        self.shared = (isinstance(data, np.ndarray) and data.flags.c_contiguous and data.flags.writeable
                       and data.dtype == tensor.dtype.np and tensor.dtype.name != "bfloat16"
                       and data.shape == tuple(tensor.shape))
        self.array = data if self.shared else np.ascontiguousarray(tensor.detach()._host())
        self.torch = torch.from_numpy(self.array)

    def finish(self) -> None:
        if not self.writes:
            return
        if self.shared:
            self.tensor._bump_version()
        else:
            with no_grad():
                self.tensor.copy_(creation.from_numpy(self.array))


class Work:
    """What a collective with ``async_op=True`` returns: ``wait()`` blocks until the
    result is in the tensors (torch's ``Work``)."""

    def __init__(self, name, work, exchanges):
        self._name, self._work, self._exchanges, self._done = name, work, exchanges, False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            _guarded(self._name, self._work.wait)
            for exchange in self._exchanges:
                exchange.finish()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done or self._work.is_completed()


def _torch_op(op):
    c10d = _c10d()
    name = op if isinstance(op, str) else getattr(op, "name", str(op)).split(".")[-1]
    if name not in vars(ReduceOp):
        raise ValueError(f"webgrad.distributed: op={op!r} is not a ReduceOp; use one of "
                         f"{', '.join(k for k in vars(ReduceOp) if k.isupper())}")
    return getattr(c10d.ReduceOp, name)


def _collective(name, call, exchanges, async_op):
    work = _guarded(name, call)
    result = Work(name, work, exchanges)
    if async_op:
        return result
    result.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine ``tensor`` over the ranks with ``op``, in place on every rank."""
    c10d = _require("all_reduce")
    ex = _Exchange(tensor, "all_reduce", writes=True)
    return _collective("all_reduce", lambda: c10d.all_reduce(ex.torch, op=_torch_op(op), group=group,
                                                             async_op=True), [ex], async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    c10d = _require("broadcast")
    ex = _Exchange(tensor, "broadcast", writes=True)
    return _collective("broadcast", lambda: c10d.broadcast(ex.torch, src=src, group=group, async_op=True),
                       [ex], async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine ``tensor`` over the ranks into rank ``dst``'s ``tensor``."""
    c10d = _require("reduce")
    ex = _Exchange(tensor, "reduce", writes=True)
    return _collective("reduce", lambda: c10d.reduce(ex.torch, dst=dst, op=_torch_op(op), group=group,
                                                     async_op=True), [ex], async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor``."""
    c10d = _require("all_gather")
    outs = [_Exchange(t, "all_gather", writes=True) for t in tensor_list]
    ex = _Exchange(tensor, "all_gather", writes=False)
    return _collective("all_gather", lambda: c10d.all_gather([o.torch for o in outs], ex.torch, group=group,
                                                             async_op=True), outs, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """The ranks' ``input_tensor``s concatenated along dim 0 into ``output_tensor``."""
    c10d = _require("all_gather_into_tensor")
    out = _Exchange(output_tensor, "all_gather_into_tensor", writes=True)
    ex = _Exchange(input_tensor, "all_gather_into_tensor", writes=False)
    gather = getattr(c10d, "all_gather_single", None) or c10d.all_gather_into_tensor  # torch 2.13's new name
    return _collective("all_gather_into_tensor", lambda: gather(out.torch, ex.torch, group=group, async_op=True),
                       [out], async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank r's ``output`` gets ``input_list[r]`` combined over the ranks."""
    c10d = _require("reduce_scatter")
    out = _Exchange(output, "reduce_scatter", writes=True)
    ins = [_Exchange(t, "reduce_scatter", writes=False) for t in input_list]
    return _collective("reduce_scatter", lambda: c10d.reduce_scatter(
        out.torch, [i.torch for i in ins], op=_torch_op(op), group=group, async_op=True), [out], async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002 (torch's name)
    """Rank r's ``output`` gets the r-th dim-0 chunk of ``input`` combined over the ranks."""
    c10d = _require("reduce_scatter_tensor")
    out = _Exchange(output, "reduce_scatter_tensor", writes=True)
    ex = _Exchange(input, "reduce_scatter_tensor", writes=False)
    scatter = getattr(c10d, "reduce_scatter_single", None) or c10d.reduce_scatter_tensor  # torch 2.13's new name
    return _collective("reduce_scatter_tensor", lambda: scatter(out.torch, ex.torch, op=_torch_op(op), group=group,
                                                                async_op=True), [out], async_op)


def send(tensor, dst, group=None, tag=0) -> None:
    c10d = _require("send")
    ex = _Exchange(tensor, "send", writes=False)
    _guarded("send", lambda: c10d.send(ex.torch, dst=dst, group=group, tag=tag))


def recv(tensor, src=None, group=None, tag=0) -> int:
    c10d = _require("recv")
    ex = _Exchange(tensor, "recv", writes=True)
    sender = _guarded("recv", lambda: c10d.recv(ex.torch, src=src, group=group, tag=tag))
    ex.finish()
    return sender


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of ``group`` reaches this point."""
    c10d = _require("barrier")
    return _collective("barrier", lambda: c10d.barrier(group=group, async_op=True), [], async_op)


def all_gather_object(object_list, obj, group=None) -> None:
    """Fill ``object_list[r]`` with rank r's picklable ``obj``."""
    c10d = _require("all_gather_object")
    _guarded("all_gather_object", lambda: c10d.all_gather_object(object_list, obj, group=group))


def broadcast_object_list(object_list, src=0, group=None, device=None) -> None:
    """Replace ``object_list``'s items with rank ``src``'s (picklable objects)."""
    c10d = _require("broadcast_object_list")
    _guarded("broadcast_object_list", lambda: c10d.broadcast_object_list(object_list, src=src, group=group))


# -- failures ----------------------------------------------------------------------
class _Heartbeat:
    """Each rank bumps a counter in the group's store every second, so that when a
    collective fails the survivors can say which ranks stopped (their counters froze)."""

    INTERVAL = 1.0
    _stop: threading.Event | None = None

    @classmethod
    def start(cls, c10d) -> None:
        store, rank = c10d.distributed_c10d._get_default_store(), c10d.get_rank()
        stop = cls._stop = threading.Event()

        def beat():
            while not stop.is_set():
                try:
                    store.add(f"webgrad/heartbeat/{rank}", 1)
                except Exception:  # the store's host is gone: the failing collective reports it
                    return
                stop.wait(cls.INTERVAL)

        threading.Thread(target=beat, name="webgrad-heartbeat", daemon=True).start()

    @classmethod
    def stop(cls) -> None:
        if cls._stop is not None:
            cls._stop.set()

    @classmethod
    def silent_ranks(cls, c10d) -> list[int] | None:
        """Ranks whose counters did not move over three beats (None: the store is unreachable)."""
        try:
            store, world = c10d.distributed_c10d._get_default_store(), c10d.get_world_size()
            before = [store.add(f"webgrad/heartbeat/{r}", 0) for r in range(world)]
            time.sleep(3 * cls.INTERVAL)
            after = [store.add(f"webgrad/heartbeat/{r}", 0) for r in range(world)]
        except Exception:
            return None
        return [r for r in range(world) if before[r] == after[r]]


def _guarded(name, call):
    """Run a c10d call; when it fails, say which ranks stopped answering."""
    try:
        return call()
    except (RuntimeError, ValueError) as error:
        c10d = _c10d()
        if not c10d.is_initialized():
            raise
        rank, world = c10d.get_rank(), c10d.get_world_size()
        silent = _Heartbeat.silent_ranks(c10d)
        if silent is None:
            who = "the process group's store is unreachable (its host, rank 0 or the torchrun agent, has stopped)"
        elif silent:
            who = f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} stopped answering"
        else:
            who = "every rank is still alive (a timeout, or the ranks called different collectives)"
        raise RuntimeError(f"webgrad.distributed.{name} failed on rank {rank} of {world}: {who}. "
                           f"c10d said: {str(error).strip().splitlines()[0]}") from error
