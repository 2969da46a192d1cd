"""Digits MLP training step (64 -> 128 -> 10, batch 64, Adam), eager against
``webgrad.compile``, with torch CPU as the peer, measured in one run; on webgpu
also the dispatches and submits per step.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/compile_step.py [--device webgpu]

(bench/mlp_step.py says why the OPENBLAS variables are unset.) On webgpu every step
reads its loss back, so the time includes the wait for the (CPU-emulated) GPU.
torch runs with one thread, as webgrad's BLAS does for products this small.
"""
from __future__ import annotations

import argparse
import os

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
    return (lambda: fn(x, y).item()), fn


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
    eager = timed(eager_step, number=number)
    compiled = timed(compiled_step, number=number)
    try:
        import torch

        torch.set_num_threads(1)  # as webgrad's numpy for these small products (core/backend/blas.py)
        peer = timed(torch_step(), number=200)
    except ImportError:
        peer = None
    print(f"MLP {IN}->{HIDDEN}->{OUT}, batch {BATCH}, Adam, on {args.device}: ms per training step")
    print(f"  webgrad eager     {eager * 1e3:8.3f}")
    print(f"  webgrad compiled  {compiled * 1e3:8.3f}   ({eager / compiled:.2f}x faster than eager)")
    if peer is not None:
        print(f"  torch CPU         {peer * 1e3:8.3f}")
        print(f"  ratio to torch: eager {eager / peer:.2f}x, compiled {compiled / peer:.2f}x")
    if args.device != "cpu":
        for name, step in (("eager", eager_step), ("compiled", compiled_step)):
            dispatches, submits = counters(args.device, step)
            print(f"  {name:9} dispatches per step {dispatches:5.1f}, submits per step {submits:4.1f}")
    print(fn.explain())


if __name__ == "__main__":
    main()
