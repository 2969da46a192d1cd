"""Digits MLP training step (64 -> 128 -> 10, batch 64, Adam), eager against
``webgrad.compile``, with torch CPU as the peer, measured in one run; on webgpu
also the dispatches and submits per step.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m bench.compile_step [--device webgpu]

(bench/mlp_step.py says why the OPENBLAS variables are unset.) On webgpu every step
reads its loss back, so the time includes the wait for the (CPU-emulated) GPU.
torch runs with one thread, as webgrad's BLAS does for products this small.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import webgrad
from bench.mlp_step import IN, HIDDEN, OUT, BATCH, data, timed, torch_step


def make_step(device, compiled):
    x_np, y_np = data()
    webgrad.manual_seed(0)
    model = webgrad.nn.Sequential(webgrad.nn.Linear(IN, HIDDEN), webgrad.nn.ReLU(),
                                  webgrad.nn.Linear(HIDDEN, OUT)).to(device)
    optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    x, y = webgrad.tensor(x_np, device=device), webgrad.tensor(y_np, device=device)

    def train_step(x, y):
        optimizer.zero_grad()
        loss = webgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    fn = webgrad.compile(train_step) if compiled else train_step
    if device == "cpu":
        return (lambda: fn(x, y)), fn
    step = (lambda: fn(x, y).item())
    step.encode_only = lambda: fn(x, y)  # type: ignore[attr-defined]
    return step, fn


def host_share(device, step, number=20):
    """ms per step spent in Python and encoding (no wait for the GPU), over ``number`` steps."""
    backend = webgrad.backend.get_backend(device)
    times = []
    for _ in range(number):
        step()  # drains the queue: the next call encodes onto an idle device
        start = time.perf_counter()
        loss = step.encode_only()
        times.append(time.perf_counter() - start)
        backend.synchronize()
        del loss
    return statistics.median(times)


def counters(device, step):
    """Dispatches and submits per step (webgpu), over 10 steps after warm-up."""
    dev = webgrad.backend.get_backend(device).device
    step()
    step()
    d0, s0 = dev.dispatches, dev.submits
    for _ in range(10):
        step()
    return (dev.dispatches - d0) / 10, (dev.submits - s0) / 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_CORETYPE"):
        print(f"note: OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set; numpy's BLAS runs a "
              f"slower kernel (see bench/mlp_step.py)")
    number = 200 if args.device == "cpu" else 20
    eager_step, _ = make_step(args.device, compiled=False)
    compiled_step, fn = make_step(args.device, compiled=True)
    try:
        import torch

        torch.set_num_threads(1)  # as webgrad's numpy for these small products (core/backend/blas.py)
        peer_step = torch_step()
    except ImportError:
        peer_step = None
    # Rounds alternate between the three so that a load change on a shared machine hits
    # all of them; each figure is its best round.
    eager, compiled, peer = float("inf"), float("inf"), None
    for _ in range(3):
        eager = min(eager, timed(eager_step, repeats=3, number=number))
        compiled = min(compiled, timed(compiled_step, repeats=3, number=number))
        if peer_step is not None:
            peer = min(peer or float("inf"), timed(peer_step, repeats=3, number=200))
    print(f"MLP {IN}->{HIDDEN}->{OUT}, batch {BATCH}, Adam, on {args.device}: ms per training step")
    print(f"  webgrad eager     {eager * 1e3:8.3f}")
    print(f"  webgrad compiled  {compiled * 1e3:8.3f}   ({eager / compiled:.2f}x faster than eager)")
    if peer is not None:
        print(f"  torch CPU         {peer * 1e3:8.3f}")
        print(f"  ratio to torch: eager {eager / peer:.2f}x, compiled {compiled / peer:.2f}x")
    if args.device != "cpu":
        for name, step in (("eager", eager_step), ("compiled", compiled_step)):
            dispatches, submits = counters(args.device, step)
            host = host_share(args.device, step)
            print(f"  {name:9} dispatches per step {dispatches:5.1f}, submits per step {submits:4.1f}, "
                  f"host (Python + encoding) {host * 1e3:6.3f} ms per step")
    if args.device != "cpu":  # where a step's device time goes (webgrad.profiler, timestamp queries)
        for name, step in (("eager", eager_step), ("compiled", compiled_step)):
            step()
            with webgrad.profiler.profile() as prof:
                step()
            print(f"{name}: kernels by device time")
            print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=6))
    print(fn.explain())


if __name__ == "__main__":
    main()
