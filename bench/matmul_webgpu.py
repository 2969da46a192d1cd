"""Matmul speed on WebGPU against numpy, and the digits MLP training step on
webgpu against numpy, measured in one run.

Prints GFLOP/s (2 * N^3 flops per product) for square N x N products on
device="webgpu" and with numpy on the host, and their ratio. Each timing warms
up first and ends with a readback of one element, so it covers the GPU work
and not just recording it. Then the ms per step of bench/mlp_step.py's model
(64 -> 128 -> 10, batch 64, Adam) on webgpu, on webgrad's numpy backend, and
written by hand in numpy.

    python bench/matmul_webgpu.py                 # N = 256, 512, 1024
    python bench/matmul_webgpu.py --sizes 512 --variant tiled
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import webgrad
from webgrad.backend.webgpu import matmul as gpu_matmul


def best_seconds(fns: dict, rounds: int, min_time: float = 0.3) -> dict:
    """Fastest run of each function in ``fns``, after one warm-up each. Rounds
    alternate between the functions, so a busy moment on a shared machine
    slows all of them alike; each round lasts at least ``min_time`` seconds."""
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            runs = 0
            while runs == 0 or time.perf_counter() - start < min_time / len(fns):
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
                runs += 1
    return best


def gpu_product(x, y):
    def run():
        out = x @ y
        webgrad.webgpu.synchronize()
        out[0, 0].item()  # read back one element: waits for the product itself
    return run


def host_product(a, b):
    return lambda: a @ b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variant", choices=sorted(gpu_matmul.BLOCKINGS), default=None,
                        help="force a kernel variant (default: chosen per adapter)")
    args = parser.parse_args()
    if not webgrad.webgpu.is_available():
        raise SystemExit("webgpu: no adapter here; install wgpu and mesa-vulkan-drivers")
    gpu_matmul.VARIANT = args.variant
    info = webgrad.webgpu.adapter_info()
    blocking = gpu_matmul.choose_blocking(webgrad.backend.webgpu.backend(), max(args.sizes), max(args.sizes))
    print(f"adapter: {info.get('device')} ({info.get('adapter_type')}), kernel at N={max(args.sizes)}: {blocking}")
    print(f"{'N':>6} {'webgpu GFLOP/s':>15} {'numpy GFLOP/s':>14} {'webgpu/numpy':>13}")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        x, y = webgrad.tensor(a, device="webgpu"), webgrad.tensor(b, device="webgpu")
        flops = 2.0 * n ** 3
        best = best_seconds({"webgpu": gpu_product(x, y), "numpy": host_product(a, b)}, args.rounds)
        gpu, host = flops / best["webgpu"] / 1e9, flops / best["numpy"] / 1e9
        print(f"{n:>6} {gpu:>15.2f} {host:>14.2f} {gpu / host:>13.4f}", flush=True)

    import mlp_step  # beside this file

    steps = {"webgpu": mlp_step.webgrad_step("webgpu"), "cpu (numpy backend)": mlp_step.webgrad_step("cpu"),
             "numpy by hand": mlp_step.numpy_step()}
    ms = {name: mlp_step.timed(step) * 1e3 for name, step in steps.items()}
    print(f"digits MLP {mlp_step.IN}->{mlp_step.HIDDEN}->{mlp_step.OUT}, batch {mlp_step.BATCH}, Adam: "
          f"ms per training step")
    for name, value in ms.items():
        print(f"  {name:<20} {value:8.3f}   webgpu/this = {ms['webgpu'] / value:.2f}x")

if __name__ == "__main__":
    main()
