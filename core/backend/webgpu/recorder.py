"""What both WebGPU devices share: recording dispatches into one open command
encoder, submitting it, the ordering rule for writes, readback bookkeeping,
counters, the profiler's timer, and turning failures into ``DeviceError``.
``NativeDevice`` (device.py, wgpu-py) and ``BrowserDevice`` (browser.py,
``js.navigator.gpu`` in Pyodide) subclass ``Recorder`` and add only a thin
transport: the ``_underscore`` methods at the bottom, which call their API.

Interface: ``create_buffer``, ``write_buffer``, ``pipeline`` (compiled once per
kernel record), ``dispatch`` (recorded into one open command encoder),
``submit``, ``read`` (blocking), ``read_pieces`` and ``read_pieces_async`` (several ranges in
one round trip), ``wait`` and ``close``; and for
``webgrad.compile``'s replay, ``tape`` (record the dispatches of a step) and ``replay``
(re-issue them with prepared bind groups, no kernel Python).

Ordering rule: ``queue.writeBuffer`` runs before any not-yet-submitted encoder,
so writing into a buffer the open encoder already uses would reorder the two.
``write_buffer`` therefore submits first in that case. Uniform parameters of all
dispatches in one encoder live in one arena buffer written just before submit.

Errors: a failing call raises a ``DeviceError`` naming the op at once. Errors the
GPU reports later (asynchronously) are collected by the transport in
``_errors`` and raised at the next read or wait, naming the dispatches recorded
since the previous one. Once the device is lost (``_lost``), every operation
raises a ``DeviceError`` that says how to recover, and nothing more reaches the GPU.
"""
from __future__ import annotations

from typing import Any

UNIFORM_SLOT = 256          # minUniformBufferOffsetAlignment on every adapter we target
ARENA_SLOTS = 256           # dispatches per submit at most
RECENT = 8                  # labels of recent dispatches kept to name the op in asynchronous errors
MIN_BUFFER = 4              # bytes; a 0-byte buffer cannot be bound (wgpu-native aborts the process)


class DeviceError(RuntimeError):
    """A WebGPU error (validation, out of memory, device lost), naming the op."""


class Window:
    """``size`` bytes of ``buffer`` from ``offset`` (a multiple of 256), bound in place of the
    whole buffer: how a kernel reaches a tensor larger than one storage binding (large.py)."""

    __slots__ = ("buffer", "offset", "size")

    def __init__(self, buffer, offset: int, size: int):
        self.buffer, self.offset, self.size = buffer, offset, size


class UniformArena:
    """The Params of every dispatch in the open encoder, one 256-byte slot each,
    written to the arena buffer in one go just before the encoder is submitted."""

    def __init__(self):
        self.data = bytearray()

    def has_room(self) -> bool:
        return len(self.data) + UNIFORM_SLOT <= UNIFORM_SLOT * ARENA_SLOTS

    def add(self, uniform: bytes, label: str) -> int:
        """Append ``uniform`` in a fresh slot and return its byte offset."""
        if not uniform:  # its binding would be 0 bytes, which wgpu-native aborts on
            raise DeviceError(f"webgpu: {label}: empty Params; every kernel binds a uniform Params at binding 0")
        if len(uniform) > UNIFORM_SLOT:
            raise DeviceError(f"webgpu: {label}: Params of {len(uniform)} bytes exceed the {UNIFORM_SLOT}-byte slot")
        offset = len(self.data)
        self.data += uniform
        self.data += bytes(-len(uniform) % UNIFORM_SLOT)
        return offset

    def take(self) -> bytes:
        data, self.data = bytes(self.data), bytearray()
        return data


class BindGroupCache:
    """Bind groups by (layout, arena slot, buffers). A training loop repeats the
    same dispatches on the same pooled buffers, and creating a bind group was the
    largest cost of recording a dispatch. Entries hold their buffers, so an id in
    a key cannot be reused by another buffer while the entry lives."""

    LIMIT = 4096

    def __init__(self):
        self.groups = {}

    def get(self, layout, uniforms, offset: int, size: int, buffers, make):
        key = (id(layout), id(uniforms), offset, size, *map(id, buffers))
        hit = self.groups.get(key)
        if hit is not None:
            return hit[0]
        if len(self.groups) >= self.LIMIT:
            self.groups.clear()
        group = make()
        self.groups[key] = (group, layout, uniforms, tuple(buffers))
        return group

    def clear(self) -> None:
        self.groups.clear()


class DispatchTimer:
    """GPU time of every dispatch, for ``webgrad.profiler`` ('timestamp-query'): while a
    timer is attached, each dispatch runs in its own compute pass whose beginning and
    end write a timestamp into a query set; ``submit`` resolves them and reads them back
    (a wait, only while profiling). ``results`` holds (dispatch number, kernel, start ns,
    end ns); timestamps are nanoseconds in the GPU's own time base."""

    CAPACITY = 1024  # dispatches per query set; a full set makes the device submit

    def __init__(self, query_set, resolved, keys=("query_set", "beginning_of_pass_write_index",
                                                  "end_of_pass_write_index")):
        self.query_set, self.resolved, self.keys = query_set, resolved, keys  # keys: the transport's spelling
        self.pending: list = []   # (dispatch number, kernel) in query order, not yet read
        self.results: list = []

    def pass_args(self, number: int, kernel: str) -> dict:
        """The compute pass's ``timestampWrites`` for dispatch ``number``."""
        index = 2 * len(self.pending)
        self.pending.append((number, kernel))
        query_set, begin, end = self.keys
        return {query_set: self.query_set, begin: index, end: index + 1}

    def full(self) -> bool:
        return len(self.pending) >= self.CAPACITY

    def add(self, raw) -> None:
        """Store the resolved (start, end) pairs of the pending dispatches, read back as ``raw``."""
        import numpy as np

        stamps = np.frombuffer(raw, dtype=np.uint64).reshape(-1, 2)
        for (number, kernel), (start, end) in zip(self.pending, stamps.tolist()):
            self.results.append((number, kernel, start, end))
        self.pending.clear()


class Tape:
    """The dispatches recorded while attached as ``Recorder.tape``: what a compiled function's
    replay re-issues without running kernel Python (replay.py). ``broken`` says why
    they cannot stand for the step (an upload or a read in the middle of it)."""

    def __init__(self):
        self.entries: list = []  # (pipeline, buffers, uniform bytes, grid, label)
        self.broken: str | None = None


class Replay:
    """A tape made ready to re-issue (``Recorder.prepare``): its uniforms live in a buffer of
    their own, written once, so its bind groups stay valid whatever else is recorded."""

    def __init__(self, uniforms, entries):
        self.uniforms = uniforms  # the UNIFORM buffer, one 256-byte slot per entry
        self.entries = entries    # (pipeline, layout, offset, size, label)


class Recorder:
    """The device interface over a transport. A subclass sets ``device``, ``limits``,
    ``adapter_info``, ``timestamps``, ``_arena`` (a UNIFORM | COPY_DST buffer of
    ``UNIFORM_SLOT * ARENA_SLOTS`` bytes) and implements the transport methods."""

    device: Any
    limits: dict
    adapter_info: dict
    timestamps: bool
    _arena: Any

    def __init__(self):
        self._uniforms = UniformArena()
        self.bind_groups = BindGroupCache()
        self._encoder = None
        self._pass = None
        self._used: set[int] = set()   # ids of buffers the open encoder touches
        self._pipelines: dict = {}
        self._programs: dict = {}  # id(compiled pipeline) -> the key (kernel record) it was made for
        self._recent: list[str] = []   # labels of the dispatches since the last read, for asynchronous errors
        self._errors: list[str] = []   # errors the GPU reported asynchronously, raised at the next read
        self._lost: str | None = None  # why the device was lost, once it was
        self.dispatches = 0            # counters the profiler reads
        self.submits = 0
        self.reads = 0
        self.timer: DispatchTimer | None = None  # webgrad.profiler's, to time dispatches (attach_timer)
        self.tape: Tape | None = None            # set by webgrad.compile to record a step

    def attach_timer(self, timer: DispatchTimer | None) -> None:
        """Time each dispatch with ``timer`` (from ``make_timer``; webgrad.profiler), or stop with None."""
        self.timer = timer

    # -- errors -------------------------------------------------------------------
    def _lost_error(self, where: str) -> DeviceError:
        return DeviceError(f"webgpu: the device was lost ({self._lost}) before {where}; call "
                           f"webgrad.webgpu.reset() to start a new one (tensors on the lost device are gone), "
                           f"restart the runtime, or use device='cpu'")

    def _raise_if_lost(self, where: str) -> None:
        if self._lost is not None:
            raise self._lost_error(where)

    def _check(self, where: str) -> None:
        """Raise the errors the GPU reported since the last read, naming the ops recorded since."""
        recent, self._recent = ", ".join(self._recent) or "no dispatch", []
        self._raise_if_lost(where)
        if self._errors:
            errors, self._errors = self._errors, []
            raise DeviceError(f"webgpu: {where}: the GPU reported {len(errors)} error(s) while running "
                              f"[{recent}]: " + " | ".join(errors))

    def _failure(self, where: str, err: Exception) -> DeviceError:
        """The DeviceError for a transport call that raised ``err`` while ``where``."""
        if self._lost is None:
            self._lost = self._loss_in(err)
        if self._lost is not None:
            return self._lost_error(where)
        return DeviceError(f"webgpu: {where} failed: {err}")

    # -- buffers ------------------------------------------------------------------
    def create_buffer(self, size: int, label: str):
        where = f"allocating {size} bytes for {label}"
        self._raise_if_lost(where)
        try:
            return self._create_buffer(max(size, MIN_BUFFER), label)
        except Exception as err:  # out of memory and validation errors come back here
            raise self._failure(where, err) from err

    def write_buffer(self, buffer, offset: int, data) -> None:
        view = memoryview(data).cast("B")
        if not view.nbytes:  # nothing to write (wgpu-py refuses an empty write)
            return
        if self.tape is not None:
            self.tape.broken = f"an upload of {view.nbytes} bytes"
        if id(buffer) in self._used:
            self.submit()
        where = f"writing {view.nbytes} bytes"
        self._raise_if_lost(where)
        try:
            self._write(buffer, offset, view)
        except Exception as err:
            raise self._failure(where, err) from err

    def read(self, buffer, offset: int, size: int) -> memoryview:
        """``size`` bytes of ``buffer`` from ``offset``, after all recorded work (blocks)."""
        return self.read_pieces([(buffer, offset, size)])[0]

    def read_pieces(self, pieces: list) -> list[memoryview]:
        """The bytes of each (buffer, offset, size), after all recorded work, in one round trip to
        the GPU (blocks): a tensor and the index-error flag cost one wait, not two."""
        size = sum(piece[2] for piece in pieces)
        if not self._start_read(size):
            return [memoryview(b"") for _ in pieces]
        try:
            data = self._read(pieces)
        except Exception as err:
            raise self._read_failed(size, err) from err
        self._check("read")
        return [memoryview(d) for d in data]

    async def read_pieces_async(self, pieces: list) -> list[memoryview]:
        size = sum(piece[2] for piece in pieces)
        if not self._start_read(size):
            return [memoryview(b"") for _ in pieces]
        try:
            data = await self._read_async(pieces)
        except Exception as err:
            raise self._read_failed(size, err) from err
        self._check("read")
        return [memoryview(d) for d in data]

    def _start_read(self, size: int) -> bool:
        """Submit; False when there is nothing to read (0 bytes touch no GPU and count no read)."""
        if self.tape is not None:
            self.tape.broken = f"a read of {size} bytes"
        self.submit()
        if size == 0:
            return False
        self._raise_if_lost(f"reading {size} bytes back")
        self.reads += 1
        return True

    def _read_failed(self, size: int, err: Exception) -> DeviceError:
        self._check("read")  # the errors the GPU reported say more than the failed map
        return self._failure(f"reading {size} bytes back", err)

    def wait(self) -> None:
        """Submit and block until the GPU has finished all work (the profiler's op-boundary sync)."""
        self.submit()
        self._raise_if_lost("wait")
        try:
            self._wait()
        except Exception as err:
            self._check("wait")
            raise self._failure("waiting for the GPU", err) from err
        self._check("wait")

    # -- kernels ------------------------------------------------------------------
    def pipeline(self, key, source: str, entry: str, constants: dict, label: str):
        """(pipeline, bind group layout) for a kernel record, compiled once per ``key``."""
        found = self._pipelines.get(key)
        if found is None:
            where = f"compiling {label}"
            self._raise_if_lost(where)
            try:
                found = self._compile(source, entry, constants, label)
            except DeviceError:
                raise
            except Exception as err:
                raise self._failure(where, err) from err
            self._pipelines[key] = found
            self._programs[id(found[0])] = key
        return found

    def program_of(self, pipeline):
        """The kernel record ``pipeline`` (as ``pipeline()`` gave it) was compiled for."""
        return self._programs.get(id(pipeline[0]))

    def dispatch(self, pipeline, buffers, uniform: bytes, grid, label: str) -> None:
        """Record one dispatch. ``buffers`` bind to 1, 2, ...; ``uniform`` to 0."""
        self._raise_if_lost(label)  # (in the browser, the lost callback runs while Python waits on the GPU)
        if not self._uniforms.has_room():
            self.submit()
        offset = self._uniforms.add(uniform, label)
        pipe, layout = pipeline
        for buf in buffers:
            self._used.add(id(buf.buffer if type(buf) is Window else buf))
        if self.tape is not None:
            self.tape.entries.append((pipeline, tuple(buffers), uniform, tuple(grid), label))
            if any(type(buf) is Window for buf in buffers):
                self.tape.broken = f"{label} over a tensor larger than one binding (run in windows)"
        timer = self.timer
        try:
            group = self.bind_groups.get(layout, self._arena, offset, len(uniform), buffers,
                                         lambda: self._bind_group(layout, self._arena, offset, len(uniform),
                                                                  buffers, label))
            if self._encoder is None:
                self._encoder = self._new_encoder()
            if self._pass is None:
                timed = None if timer is None else timer.pass_args(self.dispatches, str(pipe.label or label))
                self._pass = self._begin_pass(self._encoder, timed)
            self._record(self._pass, pipe, group, grid)
            if timer is not None:  # profiling: one pass per dispatch, so its timestamps time it alone
                pass_, self._pass = self._pass, None
                pass_.end()
        except Exception as err:
            raise self._failure(f"recording {label}", err) from err
        self._recent.append(label)
        del self._recent[:-RECENT]
        self.dispatches += 1
        if timer is not None and timer.full():
            self.submit()

    # -- replaying recorded dispatches ----------------------------------------------
    def prepare(self, tape: Tape) -> Replay:
        """``tape`` ready to re-issue: its uniforms copied once into a buffer of their own."""
        where = f"preparing a replay of {len(tape.entries)} dispatches"
        self._raise_if_lost(where)
        arena = UniformArena()
        entries = []
        for (pipe, layout), _, uniform, _, label in tape.entries:
            entries.append((pipe, layout, arena.add(uniform, label), len(uniform), label))
        data = arena.take()
        try:
            uniforms = self._create_uniforms(max(len(data), UNIFORM_SLOT), "replay uniforms")
            if data:
                self._write(uniforms, 0, memoryview(data))
        except Exception as err:
            raise self._failure(where, err) from err
        return Replay(uniforms, entries)

    def bind(self, replay: Replay, index: int, buffers):
        """The bind group of ``replay``'s dispatch ``index`` over ``buffers`` (cached)."""
        _, layout, offset, size, label = replay.entries[index]
        try:
            return self.bind_groups.get(layout, replay.uniforms, offset, size, buffers,
                                        lambda: self._bind_group(layout, replay.uniforms, offset, size, buffers, label))
        except Exception as err:
            raise self._failure(f"binding {label}", err) from err

    def replay(self, dispatches, used) -> None:
        """Record prepared dispatches: (pipeline, bind group, grid, label) each; ``used``: the
        ids of the buffers they touch (the ordering rule of ``write_buffer``). Not timed: while
        the profiler's timer is attached, compiled steps run through ``dispatch``."""
        if not dispatches:
            return
        self._raise_if_lost(dispatches[0][3])
        self._used.update(used)
        try:
            if self._encoder is None:
                self._encoder = self._new_encoder()
            if self._pass is None:
                self._pass = self._begin_pass(self._encoder, None)
            for pipe, group, grid, _ in dispatches:
                self._record(self._pass, pipe, group, grid)
        except Exception as err:
            raise self._failure(f"replaying [{', '.join(d[3] for d in dispatches[:RECENT])}]", err) from err
        self.dispatches += len(dispatches)
        self._recent += [d[3] for d in dispatches[-RECENT:]]
        del self._recent[:-RECENT]

    def submit(self) -> None:
        """Send the open encoder to the GPU. Whatever happens, the next dispatch starts a fresh
        encoder: a failed submit must not poison every later one."""
        encoder, pass_ = self._encoder, self._pass
        if encoder is None:
            return
        timer = self.timer
        timed = 0 if timer is None else len(timer.pending)
        where = f"submitting [{', '.join(self._recent) or 'no dispatch'}]"
        try:
            self._raise_if_lost(where)
            if pass_ is not None:
                pass_.end()
            if timed and timer is not None:
                self._resolve_queries(encoder, timer, timed)
            commands = encoder.finish()
            uniforms = self._uniforms.take()
            if uniforms:  # (none when every dispatch was a replay's)
                self._write(self._arena, 0, memoryview(uniforms))
            self._submit(commands)
        except DeviceError:
            if timer is not None:
                timer.pending.clear()
            raise
        except Exception as err:
            if timer is not None:
                timer.pending.clear()
            raise self._failure(where, err) from err
        finally:
            self._encoder = self._pass = None
            self._uniforms = UniformArena()
            self._used.clear()
        self.submits += 1
        if timed and timer is not None:
            try:
                timer.add(self._read([(timer.resolved, 0, 16 * timed)])[0])
            except Exception as err:
                timer.pending.clear()
                raise self._failure("reading the profiler's timestamps", err) from err

    def close(self) -> None:
        """Destroy the device (webgrad.webgpu.reset); the object is unusable afterwards."""
        self.bind_groups.clear()
        self._close()

    # -- the transport ------------------------------------------------------------
    def _loss_in(self, err: Exception) -> str | None:
        """Why the device was lost, when the failure ``err`` says so (None: it does not)."""
        return None

    def _create_buffer(self, size: int, label: str):
        raise NotImplementedError

    def _write(self, buffer, offset: int, view: memoryview) -> None:
        raise NotImplementedError

    def _read(self, pieces: list) -> list:
        """The bytes of each (buffer, offset, size), after the submitted work (blocks)."""
        raise NotImplementedError

    async def _read_async(self, pieces: list) -> list:
        raise NotImplementedError

    def _wait(self) -> None:
        raise NotImplementedError

    def _compile(self, source: str, entry: str, constants: dict, label: str):
        """(pipeline, its bind group layout 0); raise DeviceError or any error on failure."""
        raise NotImplementedError

    def _create_uniforms(self, size: int, label: str):
        """A UNIFORM | COPY_DST buffer."""
        raise NotImplementedError

    def _bind_group(self, layout, uniforms, offset: int, size: int, buffers, label: str):
        """Binding 0: ``size`` bytes of ``uniforms`` at ``offset``; 1, 2, ...: ``buffers``, each
        whole or, for a ``Window``, its byte range."""
        raise NotImplementedError

    def _new_encoder(self):
        raise NotImplementedError

    def _begin_pass(self, encoder, timestamp_writes: dict | None):
        raise NotImplementedError

    def _record(self, pass_, pipe, group, grid) -> None:
        raise NotImplementedError

    def _resolve_queries(self, encoder, timer: DispatchTimer, count: int) -> None:
        """Resolve the timestamps of ``count`` timed dispatches into ``timer.resolved``."""
        raise NotImplementedError

    def _submit(self, commands) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError
