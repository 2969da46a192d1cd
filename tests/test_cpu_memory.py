"""webgrad.cpu's memory counters (torch.cuda's names, for the cpu device): exact bytes for
new tensors, views counted once, freed buffers given back, the peak, compiled steps, the
profiler's timeline, and tensors made before counting started."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import webgrad
from webgrad import nn

cpu = webgrad.cpu


def test_bytes_follow_tensors_and_views():
    x = webgrad.randn(256, 128)  # 128 KiB
    base = cpu.memory_allocated()
    y = x.exp()
    assert cpu.memory_allocated() - base == y.nbytes == 256 * 128 * 4
    views = [y[:10], y.t(), y.reshape(-1), y.detach()]  # share y's buffer: nothing more
    assert cpu.memory_allocated() - base == y.nbytes
    del y
    assert cpu.memory_allocated() - base == 256 * 128 * 4  # the views keep the buffer alive
    del views
    assert cpu.memory_allocated() == base
    half = x.half()
    assert cpu.memory_allocated() - base == 256 * 128 * 2
    del half
    assert cpu.memory_allocated() == base
    assert cpu.memory_stats() == {"bytes_in_use": base, "peak_bytes": cpu.max_memory_allocated()}


def test_peak_and_reset():
    x = webgrad.randn(64, 64)
    cpu.reset_peak_memory_stats()
    base = cpu.memory_allocated()
    assert cpu.max_memory_allocated() == base
    ((x * 2) * 3).sum()  # 2 temporaries of 16 KiB, never both alive past the product
    peak = cpu.max_memory_allocated() - base
    assert 2 * 64 * 64 * 4 <= peak <= 2 * 64 * 64 * 4 + 64  # (+ a scalar or two)
    assert cpu.memory_allocated() - base <= 64
    cpu.reset_peak_memory_stats()
    assert cpu.max_memory_allocated() == cpu.memory_allocated()


def test_training_step_gradients_and_optimizer_state():
    model = nn.Linear(100, 50)
    opt = webgrad.optim.Adam(model.parameters(), lr=0.1)
    x = webgrad.randn(8, 100)
    base = cpu.memory_allocated()
    model(x).sum().backward()
    params = sum(p.nbytes for p in model.parameters())
    assert cpu.memory_allocated() - base >= params  # the gradients
    opt.step()
    assert cpu.memory_allocated() - base >= 3 * params  # + exp_avg, exp_avg_sq
    model.zero_grad(set_to_none=True)
    del opt
    assert cpu.memory_allocated() - base < params  # gradients and state freed (scalars stay cached)


def test_compiled_steps_count_their_planned_arrays():
    w = webgrad.randn(32, 32)
    f = webgrad.compile(lambda a: ((a @ w).relu() * 2).sum(0))
    a = webgrad.randn(16, 32)
    for _ in range(3):
        out = f(a)
    np.testing.assert_allclose(out.numpy(), ((a @ w).relu() * 2).sum(0).numpy(), rtol=1e-5)
    cpu.reset_peak_memory_stats()
    base = cpu.memory_allocated()
    f(a)
    assert cpu.max_memory_allocated() - base >= 32 * 4  # at least its result
    del f
    assert cpu.memory_allocated() <= base  # the plan's arrays go with the compiled function


def test_profiler_timeline_agrees():
    x = webgrad.randn(128, 128)
    cpu.reset_peak_memory_stats()
    with webgrad.profiler.profile(profile_memory=True) as prof:
        y = (x @ x).relu() + 1
        del y
    assert prof.memory_stats()["cpu"] == cpu.max_memory_allocated()


def test_tensors_made_before_counting_are_counted():
    code = ("import webgrad\n"
            "keep = [webgrad.zeros(1000), webgrad.ones(10, 10).double()]\n"
            "print(webgrad.cpu.memory_allocated())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) >= 4000 + 800


def test_torch_cpu_names():
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.current_device() == "cpu"
    cpu.synchronize()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds (heap.py)")
def test_a_step_reuses_the_pages_the_last_one_freed():
    """The numpy backend keeps freed arrays' memory in the process (backend/numpy/heap.py): a
    repeated step faults in no new pages; with WEBGRAD_KEEP_FREED_MEMORY=0 (glibc's own
    thresholds) each of its 256 KiB arrays is a fresh mapping, faulted in page by page."""
    code = ("import resource, webgrad\n"
            "norm = webgrad.nn.LayerNorm(64).double()\n"
            "x = webgrad.randn(16, 32, 64, dtype=webgrad.float64, requires_grad=True)\n"
            "def step():\n"
            "    norm(x * 2).exp().sum().backward()\n"
            "step()\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(50):\n"
            "    step()\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)\n")

    def faults_per_step(keep: str) -> float:
        env = dict(os.environ, WEBGRAD_KEEP_FREED_MEMORY=keep)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        return float(out.stdout.split()[-1])

    kept, fresh = faults_per_step("1"), faults_per_step("0")
    assert kept < 8 and fresh > 100, (kept, fresh)
