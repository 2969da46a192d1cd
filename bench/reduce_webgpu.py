"""Reduction speed on WebGPU against numpy, measured in one run.

Times ``sum`` over an N x N float32 tensor by rows (dim=1), by columns (dim=0)
and in full, on device="webgpu" and with numpy on the host, and prints their
ratio. As a peer on the same adapter it also times ``x * 2`` (an elementwise
kernel reading and writing N*N elements): a reduction that reads the same data
should not be much slower than that; the floor (a sum of 4 elements) is
the cost of one dispatch plus a readback. With ``--layouts`` it also times every
threads-per-row choice (LANES) to show what the launcher's rule picks.
Each timing warms up first and ends with a readback of one element.

    python bench/reduce_webgpu.py                  # N = 1024
    python bench/reduce_webgpu.py --size 512 --layouts
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import webgrad
from webgrad.backend.webgpu import reduce as gpu_reduce


def best_seconds(fn, repeats: int, min_time: float = 0.3) -> float:
    """Fastest of ``repeats`` timed runs (after one warm-up), running more
    repeats if the total would be under ``min_time`` seconds."""
    fn()
    times = []
    while len(times) < repeats or sum(times) < min_time:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if len(times) >= 50:
            break
    return min(times)


def on_gpu(fn, x):
    def run():
        out = fn(x)
        out.reshape(-1)[0].item()  # read back one element: waits for the kernel itself
    return run


CASES = {
    "rows (dim=1)": (lambda t: t.sum(1), lambda a: a.sum(1)),
    "columns (dim=0)": (lambda t: t.sum(0), lambda a: a.sum(0)),
    "all": (lambda t: t.sum(), lambda a: a.sum()),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layouts", action="store_true", help="also time every threads-per-row choice")
    args = parser.parse_args()
    if not webgrad.webgpu.is_available():
        raise SystemExit("webgpu: no adapter here; install wgpu and mesa-vulkan-drivers")
    info = webgrad.webgpu.adapter_info()
    n = args.size
    host = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    x = webgrad.tensor(host, device="webgpu")
    print(f"adapter: {info.get('device')} ({info.get('adapter_type')}), sum over {n}x{n} float32")
    peer = best_seconds(on_gpu(lambda t: t * 2.0, x), args.repeats)
    floor = best_seconds(on_gpu(lambda t: t.sum(), webgrad.ones(4, device="webgpu")), args.repeats)
    print(f"peer: x * 2 on webgpu {peer * 1e3:.2f} ms; floor: sum of 4 elements with readback {floor * 1e3:.2f} ms")
    print(f"{'sum':<16} {'webgpu ms':>10} {'numpy ms':>9} {'webgpu/numpy':>13} {'webgpu/peer':>12}")
    for name, (gpu_fn, np_fn) in CASES.items():
        gpu_s = best_seconds(on_gpu(gpu_fn, x), args.repeats)
        np_s = best_seconds(lambda f=np_fn: f(host), args.repeats)
        print(f"{name:<16} {gpu_s * 1e3:>10.2f} {np_s * 1e3:>9.3f} {gpu_s / np_s:>12.1f}x {gpu_s / peer:>11.2f}x")
    if args.layouts:
        print(f"\n{'sum':<16} {'LANES':>6} {'webgpu ms':>10}   (* = the launcher's choice)")
        for name, (gpu_fn, _) in CASES.items():
            picked = launcher_choice(gpu_fn, x)
            for lanes in (1, 4, 16, 32, 64, 128):
                gpu_s = best_seconds(on_gpu(with_lanes(gpu_fn, lanes), x), args.repeats)
                print(f"{name:<16} {lanes:>6} {gpu_s * 1e3:>10.2f} {'*' if lanes == picked else ''}")


def with_lanes(fn, lanes):
    """``fn`` with the launcher's threads-per-row choice forced to ``lanes``."""
    def forced(t):
        chosen = gpu_reduce.choose_lanes
        gpu_reduce.choose_lanes = lambda *args: lanes
        try:
            return fn(t)
        finally:
            gpu_reduce.choose_lanes = chosen
    return forced


def launcher_choice(fn, x):
    chosen, picked = gpu_reduce.choose_lanes, []
    gpu_reduce.choose_lanes = lambda *args: picked.append(chosen(*args)) or picked[-1]
    try:
        fn(x)
    finally:
        gpu_reduce.choose_lanes = chosen
    return picked[-1]

if __name__ == "__main__":
    main()
