"""Activation checkpointing against the plain step, in one run: a 16-block residual MLP (and a
16-block transformer) trained one step at a time, each block wrapped in ``checkpoint`` or not.
Prints peak activation memory, seconds per step and the largest gradient difference.

    python bench/checkpoint_memory.py [--device cpu|webgpu] [--steps 10]

Peak memory: ``max_memory_allocated()`` of ``webgrad.webgpu`` or ``webgrad.cpu`` minus what was
held before the step (parameters, their .grad kept from the step before, the batch). The
issue's goal: peak <= 0.35x the plain step, same gradients to 1e-6, step time <= 1.4x.
The recomputation repeats each block's forward, so the time ratio is about (2F + B) / (F + B):
the MLP uses GELU's tanh form, as exact GELU's erf on numpy costs more than the matmuls.
numpy gets one BLAS thread (``--threads``), so other work on a 2-core machine skews both alike.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import webgrad
from webgrad import nn
from webgrad.utils.checkpoint import checkpoint


class MLPBlock(nn.Module):
    def __init__(self, width, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return x + self.drop(self.down(nn.functional.gelu(self.up(self.norm(x)), approximate="tanh")))


class Net(nn.Module):
    """16 blocks, each checkpointed when ``checked``."""

    def __init__(self, make_block, blocks=16):
        super().__init__()
        self.blocks = nn.ModuleList([make_block() for _ in range(blocks)])
        self.checked = False

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checked else block(x)
        return x


def mlp(width, dropout):
    return Net(lambda: MLPBlock(width, dropout))


def transformer(width, dropout):
    return Net(lambda: nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, dropout=dropout,
                                                  batch_first=True))


def _step(net, x):
    net.zero_grad(set_to_none=False)  # .grad stays allocated: the peak is the step's own
    (net(x) ** 2).mean().backward()


def _peak(net, x, device) -> int:
    memory = webgrad.webgpu if device == "webgpu" else webgrad.cpu
    memory.synchronize()
    memory.reset_peak_memory_stats()
    base = memory.memory_allocated()
    _step(net, x)
    memory.synchronize()
    return memory.max_memory_allocated() - base


def _seconds(net, x, device) -> float:
    start = time.perf_counter()
    _step(net, x)
    if device == "webgpu":
        net.blocks[0].parameters().__next__().grad.numpy()  # wait for the device
    return time.perf_counter() - start


def compare(name, make, device, width, batch, steps):
    webgrad.manual_seed(0)
    net = make(width, 0.1).to(device)
    x = webgrad.randn(*batch, width, device=device)
    grads = {}
    for checked in (False, True):  # the same seed: the same dropout masks
        net.checked = checked
        net.zero_grad(set_to_none=True)
        webgrad.manual_seed(1)
        (net(x) ** 2).mean().backward()
        grads[checked] = [p.grad.numpy() for p in net.parameters()]
    diff = max(float(np.abs(a - b).max()) for a, b in zip(grads[False], grads[True]))
    peaks, times = {}, {False: [], True: []}
    for checked in (False, True):
        net.checked = checked
        _step(net, x)  # warm up (kernels, pool)
        peaks[checked] = _peak(net, x, device)
    for _ in range(steps):  # alternate, so load on the machine hits both alike
        for checked in (False, True):
            net.checked = checked
            times[checked].append(_seconds(net, x, device))
    t = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name:<12} plain: peak {peaks[False] / 2 ** 20:7.2f} MiB {t[False] * 1e3:8.1f} ms/step | "
          f"checkpoint: peak {peaks[True] / 2 ** 20:7.2f} MiB {t[True] * 1e3:8.1f} ms/step | "
          f"peak {peaks[True] / max(peaks[False], 1):.2f}x  time {t[True] / t[False]:.2f}x  "
          f"max grad diff {diff:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy (0: leave as is)")
    args = parser.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    small = args.device == "webgpu"  # llvmpipe is a CPU emulation: keep the shapes small there
    width = 64 if small else 256
    print(f"device {args.device}, 16 blocks, width {width}, dropout 0.1, BLAS threads {args.threads or 'default'}")
    compare("MLP", mlp, args.device, width, (64,) if small else (512,), args.steps)
    compare("transformer", transformer, args.device, width, (4, 16) if small else (8, 64), args.steps)


if __name__ == "__main__":
    main()
