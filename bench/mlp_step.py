"""Digits MLP training step (64 -> 128 -> 10, batch 64, Adam): webgrad's numpy
backend against PyTorch CPU and a hand-written numpy MLP, measured in one run,
printed as ratios. Also the per-op overhead on tiny tensors.

    python bench/mlp_step.py [--device webgpu]

Some machines here set OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (older OpenBLAS needed
them); they make numpy's small matmuls ~50x slower. Measure with both unset:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/mlp_step.py
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import webgrad

BATCH, IN, HIDDEN, OUT = 64, 64, 128, 10


def timed(step, repeats=5, number=200) -> float:
    """Median seconds per call over ``repeats`` runs of ``number`` calls."""
    for _ in range(20):
        step()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            step()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def data():
    rng = np.random.default_rng(0)
    return rng.random((BATCH, IN), dtype=np.float32), rng.integers(0, OUT, BATCH)


def webgrad_step(device):
    x_np, y_np = data()
    webgrad.manual_seed(0)
    model = webgrad.nn.Sequential(webgrad.nn.Linear(IN, HIDDEN), webgrad.nn.ReLU(),
                                  webgrad.nn.Linear(HIDDEN, OUT)).to(device)
    optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    x, y = webgrad.tensor(x_np, device=device), webgrad.tensor(y_np, device=device)

    def step():
        loss = webgrad.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    if device != "cpu":
        inner = step

        def step():  # include the wait for the GPU: read the loss every step
            return inner().item()
    return step


def torch_step():
    import torch

    x_np, y_np = data()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.tensor(x_np), torch.tensor(y_np)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def numpy_step():
    """The same MLP by hand in numpy: the arithmetic floor, no framework."""
    x, y = data()
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((IN, HIDDEN), dtype=np.float32) * 0.1, np.zeros(HIDDEN, np.float32),
              rng.standard_normal((HIDDEN, OUT), dtype=np.float32) * 0.1, np.zeros(OUT, np.float32)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    onehot = np.eye(OUT, dtype=np.float32)[y]

    def step():
        w1, b1, w2, b2 = params
        h = np.maximum(x @ w1 + b1, 0)
        logits = h @ w2 + b2
        e = np.exp(logits - logits.max(1, keepdims=True))
        d_logits = (e / e.sum(1, keepdims=True) - onehot) / BATCH
        d_h = (d_logits @ w2.T) * (h > 0)
        grads = [x.T @ d_h, d_h.sum(0), h.T @ d_logits, d_logits.sum(0)]
        for p, g, mi, vi in zip(params, grads, m, v):
            mi *= 0.9
            mi += 0.1 * g
            vi *= 0.999
            vi += 0.001 * g * g
            p -= 1e-3 * mi / (np.sqrt(vi) + 1e-8)
    return step


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_CORETYPE"):
        print(f"note: OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set; numpy's BLAS runs a "
              f"slower kernel (see this file's docstring)")
    ours = timed(webgrad_step(args.device))
    floor = timed(numpy_step())
    print(f"MLP {IN}->{HIDDEN}->{OUT}, batch {BATCH}, Adam: ms per training step")
    print(f"  webgrad ({args.device}) {ours * 1e3:8.3f}")
    print(f"  numpy by hand    {floor * 1e3:8.3f}   webgrad/numpy = {ours / floor:.2f}x")
    try:
        peer = timed(torch_step())
        goal = "  (goal <= 3x)" if args.device == "cpu" else ""
        print(f"  torch CPU        {peer * 1e3:8.3f}   webgrad/torch = {ours / peer:.2f}x{goal}")
    except ImportError:
        print("  torch CPU        not installed")

    a, b = webgrad.ones(4, device=args.device), webgrad.ones(4, device=args.device)
    na, nb = np.ones(4, np.float32), np.ones(4, np.float32)
    per_op = timed(lambda: a + b, number=2000)
    numpy_op = timed(lambda: na + nb, number=2000)
    line = f"per-op overhead, 4-element add (us): webgrad {per_op * 1e6:.2f}, numpy {numpy_op * 1e6:.2f}"
    try:
        import torch

        ta, tb = torch.ones(4), torch.ones(4)
        line += f", torch {timed(lambda: ta + tb, number=2000) * 1e6:.2f}"
    except ImportError:
        pass
    print(line)


if __name__ == "__main__":
    main()
