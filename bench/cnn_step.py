"""CNN training steps against PyTorch CPU, measured in one run and printed as ratios.

- The pytorch/examples MNIST network: conv 1->32 3x3, conv 32->64 3x3, max-pool 2,
  dropout, fc 9216->128->10, batch 64, Adadelta.
- A ResNet-18-style basic block at 32x32 (conv 64->64 3x3, BatchNorm, ReLU, twice, plus
  the identity), batch 16, SGD with momentum.
- The digits demo's CNN (demos/digits.py: conv 1->16, pool, conv 16->32, pool, linear;
  8x8 images), batch 64, Adam: the browser bench's CNN row.
- max_pool2d and avg_pool2d forward + backward on the MNIST network's pool input.
- On webgpu: conv2d forward + backward GFLOP/s against a matmul of the same FLOPs.

webgrad cpu (eager and compiled) and torch CPU run alternated, medians of the rounds.
``--threads 1`` gives both one thread (torch.set_num_threads, threadpoolctl for numpy's
BLAS); the default leaves both at their own choice. ``--models`` picks some of mnist,
resnet, digits, pooling (on a CPU-emulated adapter the first two take minutes a step).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/cnn_step.py [--threads 1] [--webgpu] [--models digits]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np

import webgrad

MNIST_BATCH, BLOCK_BATCH = 64, 16


def seconds_per_call(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


# Seconds of rest before each candidate's turn: a framework's idle threads may spin for a
# while after its last parallel call (OpenBLAS's for about 0.1 s), taking the cores the next
# candidate would use. The rest leaves this VM's cores cold, though: the first step after it
# ran 15-30 ms slower than the next ones (48 ms) for webgrad at 2 threads, whose workers wait
# blocked, and ~1 ms for torch, whose workers spin; a short busy loop instead of that step
# removed the difference. So each turn starts with one untimed call, as a training loop's
# steps follow one another.
COOL_DOWN = 0.3


def alternated(candidates: dict, rounds: int = 3, number: int = 5) -> dict:
    """Median seconds per call of each candidate, the candidates taking turns each round."""
    for fn in candidates.values():  # warm up (and trace the compiled ones)
        for _ in range(3):
            fn()
    runs: dict = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            time.sleep(COOL_DOWN)
            fn()
            runs[name].append(seconds_per_call(fn, number))
    return {name: statistics.median(times) for name, times in runs.items()}


# -- the models, written the same way for both frameworks -----------------------------------
def mnist_net(lib):
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = lib.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return F.log_softmax(self.fc2(x), dim=1)
    return Net()


def basic_block(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, channels=64):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)
            self.head = nn.Linear(channels, 10)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)) + x)
            return F.log_softmax(self.head(out.mean((2, 3))), dim=1)
    return Block()


def digits_cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class DigitsCNN(nn.Module):  # demos/digits.py's, with log-probabilities out
        def __init__(self, channels=16):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Linear(2 * channels * 4, 10)

        def forward(self, x):
            return F.log_softmax(self.classifier(self.features(x).flatten(1)), dim=1)
    return DigitsCNN()


def data(shape, batch):
    rng = np.random.default_rng(0)
    return rng.standard_normal((batch, *shape), dtype=np.float32), rng.integers(0, 10, batch)


def step_fn(lib, model, optimizer, x, y, read=None):
    F = lib.nn.functional

    def step():
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss if read is None else read(loss)
    return step


def training_steps(name, make_model, make_optimizer, shape, batch, devices):
    import torch

    x_np, y_np = data(shape, batch)
    steps = {}
    torch.manual_seed(0)
    model = make_model(torch)
    steps["torch cpu"] = step_fn(torch, model, make_optimizer(torch, model), torch.tensor(x_np), torch.tensor(y_np))
    for device in devices:
        for compiled in (False, True):
            webgrad.manual_seed(0)
            model = make_model(webgrad).to(device)
            x, y = webgrad.tensor(x_np, device=device), webgrad.tensor(y_np, device=device)
            read = None if device == "cpu" else (lambda loss: loss.item())  # wait for the GPU each step
            step = step_fn(webgrad, model, make_optimizer(webgrad, model), x, y)
            if compiled:
                step = webgrad.compile(step)
            steps[f"webgrad {device}{' compiled' if compiled else ''}"] = (
                step if read is None else (lambda step=step, read=read: read(step())))
    times = alternated(steps)
    peer = times["torch cpu"]
    print(f"{name}: ms per training step")
    for label, t in times.items():
        ratio = "" if label == "torch cpu" else f"   {t / peer:5.2f}x torch"
        print(f"  {label:26s} {t * 1e3:9.2f}{ratio}")


def pooling(devices):
    import torch

    x_np = np.random.default_rng(1).standard_normal((MNIST_BATCH, 64, 24, 24), dtype=np.float32)
    print("pooling 2x2 on (64, 64, 24, 24), forward + backward: ms")
    for pool in ("max_pool2d", "avg_pool2d"):
        tx = torch.tensor(x_np, requires_grad=True)
        calls = {"torch cpu": lambda tx=tx, pool=pool: getattr(torch.nn.functional, pool)(tx, 2).sum().backward()}
        for device in devices:
            wx = webgrad.tensor(x_np, device=device, requires_grad=True)
            sync = (lambda: None) if device == "cpu" else (lambda wx=wx: wx.grad[0, 0, 0, 0].item())

            def call(wx=wx, sync=sync, pool=pool):
                getattr(webgrad.nn.functional, pool)(wx, 2).sum().backward()
                sync()
            calls[f"webgrad {device}"] = call
        times = alternated(calls, number=10)
        line = ", ".join(f"{k} {v * 1e3:.2f}" + ("" if k == "torch cpu" else f" ({v / times['torch cpu']:.2f}x)")
                         for k, v in times.items())
        print(f"  {pool}: {line}")


def conv_against_matmul():
    """conv2d forward + backward GFLOP/s on webgpu against a matmul of the same FLOPs."""
    n, c, o, hw, k = 16, 64, 64, 32, 3
    x = webgrad.randn(n, c, hw, hw, device="webgpu", requires_grad=True)
    w = webgrad.randn(o, c, k, k, device="webgpu", requires_grad=True)
    flops = 3 * 2 * n * o * hw * hw * c * k * k  # forward and two backwards, padding 1 keeps hw
    m = int(round((flops / 6) ** (1 / 3)))
    a = webgrad.randn(m, m, device="webgpu", requires_grad=True)
    b = webgrad.randn(m, m, device="webgpu", requires_grad=True)

    def conv():
        webgrad.nn.functional.conv2d(x, w, padding=1).sum().backward()
        w.grad[0, 0, 0, 0].item()

    def matmul():
        (a @ b).sum().backward()
        b.grad[0, 0].item()
    times = alternated({"conv": conv, "matmul": matmul})
    gflops = {name: flops / t / 1e9 for name, t in times.items()}
    print(f"webgpu conv2d 3x3 {c}->{o} on {n}x{hw}x{hw}, forward + backward: {gflops['conv']:.1f} GFLOP/s; "
          f"matmul {m}x{m} (same FLOPs): {gflops['matmul']:.1f} GFLOP/s; conv/matmul = "
          f"{gflops['conv'] / gflops['matmul']:.0%}")


def main() -> None:
    import os

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: their own choice)")
    parser.add_argument("--webgpu", action="store_true", help="also webgrad on webgpu")
    parser.add_argument("--models", default="mnist,resnet,digits,pooling", help="comma-separated")
    args = parser.parse_args()
    models = args.models.split(",")
    if os.environ.get("OPENBLAS_CORETYPE"):
        print("note: OPENBLAS_CORETYPE is set; numpy's BLAS runs a slower kernel (see this file's docstring)")
    devices = ["cpu"] + (["webgpu"] if args.webgpu else [])
    limits = contextlib.nullcontext()
    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        limits = threadpool_limits(args.threads)
    print(f"threads: {args.threads or 'default'} (torch {torch.get_num_threads()})")
    with limits:
        if "mnist" in models:
            training_steps(f"MNIST CNN (pytorch/examples), batch {MNIST_BATCH}, Adadelta", mnist_net,
                           lambda lib, model: lib.optim.Adadelta(model.parameters(), lr=1.0), (1, 28, 28),
                           MNIST_BATCH, devices)
        if "resnet" in models:
            training_steps(f"ResNet-18 basic block 64ch at 32x32, batch {BLOCK_BATCH}, SGD momentum", basic_block,
                           lambda lib, model: lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                           (64, 32, 32), BLOCK_BATCH, devices)
        if "digits" in models:
            training_steps(f"digits CNN (demos/digits.py), batch {MNIST_BATCH}, Adam", digits_cnn,
                           lambda lib, model: lib.optim.Adam(model.parameters(), lr=1e-2), (1, 8, 8),
                           MNIST_BATCH, devices)
        if "pooling" in models:
            pooling(devices)
        if args.webgpu:
            conv_against_matmul()


if __name__ == "__main__":
    main()
