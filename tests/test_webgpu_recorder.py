"""The recorder both WebGPU devices share (core/backend/webgpu/recorder.py), on the native
transport: a failed submit leaves the device usable, reads are counted, 0-byte buffers are
safe, and errors wgpu-py can only log (asynchronous errors, device loss) become DeviceErrors
naming the op. The browser transport runs the same code in tests/browser/test_browser_device.py.

Tests that make or lose a device of their own run in a subprocess: wgpu-py reports a loss to
one logger shared by every device in the process, and a lost callback may arrive late."""
from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu

pytestmark = requires_webgpu

FILL = """
struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1) fn fill() { out[0] = f32(p.n); }
"""


def _device():
    from webgrad.backend.webgpu import backend

    return backend().device


def _fill(device, buffer, value: int, label="fill.wgsl:fill") -> None:
    from webgrad.kernels import Program

    # keyed by a Program record, as every kernel is (test_webgpu_backend checks the shared cache)
    key = Program.of("test_webgpu_recorder.wgsl", "fill", generated="test")
    pipe = device.pipeline(key, FILL, "fill", {}, "fill.wgsl:fill")
    device.dispatch(pipe, [buffer], struct.pack("I", value), (1, 1, 1), label)


def _first_float(device, buffer) -> float:
    return float(np.frombuffer(device.read(buffer, 0, 4), dtype=np.float32)[0])


@pytest.mark.parametrize("failing", ["queue.submit", "encoder.finish"])
def test_a_failed_submit_leaves_the_device_usable(monkeypatch, failing):
    from webgrad.backend.webgpu.device import DeviceError

    device = _device()
    buffer = device.create_buffer(16, "test buffer")
    device.write_buffer(buffer, 0, np.zeros(4, np.float32).tobytes())
    _fill(device, buffer, 7, label="the failing dispatch")

    def fail(*args, **kwargs):
        raise RuntimeError("injected failure")

    target = device.device.queue if failing == "queue.submit" else type(device._encoder)
    monkeypatch.setattr(target, failing.split(".")[1], fail)
    with pytest.raises(DeviceError, match="the failing dispatch.*injected failure"):
        device.submit()
    monkeypatch.undo()
    assert device._encoder is None and device._pass is None and not device._used
    # The next dispatch records into a fresh encoder, with a fresh uniform arena, and runs.
    _fill(device, buffer, 3)
    assert _first_float(device, buffer) == 3.0
    x = webgrad.arange(4.0, device="webgpu")
    np.testing.assert_array_equal((x * 2).numpy(), [0.0, 2.0, 4.0, 6.0])


def test_a_failed_submit_while_profiling_drops_its_timestamps(monkeypatch):
    from webgrad.backend.webgpu.device import DeviceError

    device = _device()
    if not device.timestamps:
        pytest.skip("no 'timestamp-query' on this adapter")
    buffer = device.create_buffer(16, "test buffer")
    device.submit()
    device.timer = timer = device.make_timer()
    try:
        _fill(device, buffer, 5)
        assert len(timer.pending) == 1
        monkeypatch.setattr(device.device.queue, "submit", lambda *args: 1 / 0)
        with pytest.raises(DeviceError, match="ZeroDivisionError|division by zero"):
            device.submit()
        monkeypatch.undo()
        assert timer.pending == [] and timer.results == []
        _fill(device, buffer, 6)
        assert _first_float(device, buffer) == 6.0
        assert [kernel for _, kernel, _, _ in timer.results] == ["fill.wgsl:fill"]
    finally:
        device.timer = None


def test_reads_are_counted_and_empty_reads_touch_nothing():
    device = _device()
    x = webgrad.arange(6.0, device="webgpu") + 1
    before = (device.reads, device.submits)
    x.numpy()
    assert (device.reads - before[0], device.submits - before[1]) == (1, 1)
    buffer = device.create_buffer(16, "test buffer")
    assert bytes(device.read(buffer, 0, 0)) == b""
    assert device.reads - before[0] == 1  # a 0-byte read is no readback
    empty = webgrad.zeros(0, 3, device="webgpu")
    assert empty.numpy().shape == (0, 3)
    assert (empty + 1).numpy().shape == (0, 3)


def test_zero_byte_buffers_and_writes():
    device = _device()
    buffer = device.create_buffer(0, "empty")
    assert buffer.size >= 4  # a 0-byte binding would abort the process in wgpu-native
    assert bytes(device.read(buffer, 0, 0)) == b""
    device.write_buffer(buffer, 0, b"")  # wgpu-py refuses an empty write; it is a no-op here
    _fill(device, buffer, 9)  # bindable
    assert _first_float(device, buffer) == 9.0


def test_write_after_a_dispatch_that_uses_the_buffer_runs_after_it():
    device = _device()
    buffer = device.create_buffer(16, "test buffer")
    _fill(device, buffer, 4)
    submits = device.submits
    device.write_buffer(buffer, 0, np.float32(8).tobytes())  # must not overtake the fill
    assert device.submits == submits + 1
    assert _first_float(device, buffer) == 8.0


def test_errors_wgpu_can_only_log_surface_at_the_next_read():
    """wgpu-py hands errors that no call can raise to ErrorHandler.log_error (its logger);
    the next read raises them, naming the dispatches recorded since the last read."""
    from conftest import _webgpu_errors
    from wgpu.backends.wgpu_native._api import error_handler

    from webgrad.backend.webgpu.device import DeviceError

    device = _device()
    buffer = device.create_buffer(16, "test buffer")
    device.read(buffer, 0, 4)
    _fill(device, buffer, 1, label="the guilty dispatch")
    error_handler.log_error("Validation Error: synthetic asynchronous error for test_webgpu_recorder")
    _webgpu_errors.records.clear()  # reported to the suite's hook too; this one is on purpose
    with pytest.raises(DeviceError, match=r"\[the guilty dispatch\].*synthetic asynchronous error"):
        device.read(buffer, 0, 4)
    assert _first_float(device, buffer) == 1.0  # reported once, then the device carries on


LOST = r"""
import struct
from webgrad.backend.webgpu.device import DeviceError, NativeDevice

FILL = '''%s'''

def expect_lost(call, where):
    try:
        call()
    except DeviceError as err:
        message = str(err)
        assert "device was lost" in message and "webgrad.webgpu.reset()" in message, message
        assert where in message, message
    else:
        raise AssertionError("no DeviceError")

# A loss read from a call's error: the device sends nothing more to the GPU (a submit on a lost
# device can abort the process in wgpu-native).
device = NativeDevice()
buffer = device.create_buffer(16, "b")
pipe = device.pipeline(("fill",), FILL, "fill", {}, "fill.wgsl:fill")
device.dispatch(pipe, [buffer], struct.pack("I", 1), (1, 1, 1), "fill one")
device.device.destroy()
expect_lost(device.submit, "fill one")
assert device._encoder is None
expect_lost(lambda: device.dispatch(pipe, [buffer], struct.pack("I", 2), (1, 1, 1), "fill two"), "fill two")
expect_lost(lambda: device.read(buffer, 0, 4), "reading 4 bytes")
expect_lost(lambda: device.write_buffer(buffer, 0, b"abcd"), "writing 4 bytes")
expect_lost(lambda: device.create_buffer(4, "c"), "allocating 4 bytes for c")
device.close()

# A loss wgpu-py only logs (a driver reset; its lost callback): the next operation says so.
from wgpu.backends.wgpu_native._api import error_handler
device = NativeDevice()
buffer = device.create_buffer(16, "b")
error_handler.log_error("The WGPU device was lost (unknown):\nthe driver was reset")
expect_lost(lambda: device.create_buffer(4, "c"), "the driver was reset")
device.close()
print("ok")
""" % FILL


def test_a_lost_device_says_so_at_every_later_operation():
    done = subprocess.run([sys.executable, "-c", LOST], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr
