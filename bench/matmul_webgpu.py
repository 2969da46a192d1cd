"""Matmul speed on WebGPU against numpy, measured in one run.

Prints GFLOP/s (2 * N^3 flops per product) for square N x N products on
device="webgpu" and with numpy on the host, and their ratio. Each timing warms
up first and ends with a readback of one element, so it covers the GPU work
and not just recording it.

    python bench/matmul_webgpu.py                 # N = 256, 512, 1024
    python bench/matmul_webgpu.py --sizes 512 --variant tiled
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import webgrad
from webgrad.backends.webgpu import matmul as gpu_matmul


def best_seconds(fn, repeats: int, min_time: float = 0.5) -> float:
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


def gpu_product(x, y):
    def run():
        out = x @ y
        webgrad.webgpu.synchronize()
        out[0, 0].item()  # read back one element: waits for the product itself
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variant", choices=sorted(gpu_matmul.BLOCKINGS), default=None,
                        help="force a kernel variant (default: chosen per adapter)")
    args = parser.parse_args()
    if not webgrad.webgpu.is_available():
        raise SystemExit("webgpu: no adapter here; install wgpu and mesa-vulkan-drivers")
    gpu_matmul.VARIANT = args.variant
    info = webgrad.webgpu.adapter_info()
    blocking = gpu_matmul.choose_blocking(webgrad.backends.webgpu.backend())
    print(f"adapter: {info.get('device')} ({info.get('adapter_type')}), kernel: {blocking}")
    print(f"{'N':>6} {'webgpu GFLOP/s':>15} {'numpy GFLOP/s':>14} {'webgpu/numpy':>13}")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        x, y = webgrad.tensor(a, device="webgpu"), webgrad.tensor(b, device="webgpu")
        flops = 2.0 * n ** 3
        gpu = flops / best_seconds(gpu_product(x, y), args.repeats) / 1e9
        host = flops / best_seconds(lambda: a @ b, args.repeats) / 1e9
        print(f"{n:>6} {gpu:>15.2f} {host:>14.2f} {gpu / host:>13.4f}")


if __name__ == "__main__":
    main()
