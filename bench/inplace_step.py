"""Training steps written with in-place updates, as PyTorch programs write them, against
PyTorch CPU in one run, printed as ratios:

- "manual SGD": the pytorch.org "What is torch.nn really?" loop on an MLP (784 -> 512 -> 10,
  batch 64): ``with no_grad(): p -= p.grad * lr; p.grad.zero_()`` per parameter;
- "ReLU(inplace=True)": a ResNet-18 basic block at 32x32 (64 channels, batch 16) written as
  torchvision writes it, its ReLUs in place, trained with SGD.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/inplace_step.py [--device webgpu] [--threads 1]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np

import webgrad

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_step import alternated  # noqa: E402


def manual_sgd(lib, device):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.random((64, 784), dtype=np.float32), device=device)
    y = lib.tensor(rng.integers(0, 10, 64), device=device)
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(784, 512), lib.nn.ReLU(), lib.nn.Linear(512, 10)).to(device)
    params = list(model.parameters())

    def step():
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= p.grad * 0.1
                p.grad.zero_()
        return loss
    return step


def relu_inplace_block(lib, device):
    nn = lib.nn

    class BasicBlock(nn.Module):  # torchvision's, at one stride
        def __init__(self, channels=64):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += x
            return self.relu(out)

    lib.manual_seed(0)
    model = BasicBlock().to(device)
    head = nn.Linear(64, 10).to(device)
    optimizer = lib.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((16, 64, 32, 32), dtype=np.float32), device=device)
    y = lib.tensor(rng.integers(0, 10, 16), device=device)

    def step():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(head(model(x).mean((2, 3))), y)
        loss.backward()
        optimizer.step()
        return loss
    return step


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: their own choice)")
    args = parser.parse_args()
    limit = contextlib.nullcontext()
    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        limit = threadpool_limits(args.threads)
    read = (lambda loss: loss) if args.device == "cpu" else (lambda loss: loss.item())  # wait for the GPU
    with limit:
        for name, make in (("manual SGD (MLP 784-512-10, batch 64)", manual_sgd),
                           ("ReLU(inplace=True) (ResNet basic block, 16x64x32x32)", relu_inplace_block)):
            ours, theirs = make(webgrad, args.device), make(torch, "cpu")
            times = alternated({"torch cpu": theirs, f"webgrad {args.device}": lambda ours=ours: read(ours())},
                               rounds=5)
            peer = times["torch cpu"]
            print(f"{name}: ms per step")
            for label, t in times.items():
                print(f"  {label:16s} {t * 1e3:8.2f}" + ("" if label == "torch cpu" else f"   {t / peer:5.2f}x torch"))


if __name__ == "__main__":
    main()
