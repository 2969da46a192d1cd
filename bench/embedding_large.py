"""An embedding table larger than one WebGPU storage binding, trained natively: a bag-of-words
classifier (table, mean over the bag, linear head) on random bags, one optimizer step at a
time, on webgrad webgpu, webgrad cpu and torch cpu in one run (alternated, medians).

    python bench/embedding_large.py [--mib 300] [--dim 128] [--optimizer sgd|adam] [--steps 5]

The table's size is past llvmpipe's 128 MiB maxStorageBufferBindingSize, so every kernel on
it runs in windows (backend/webgpu/large.py). Prints ms per step, the ratios against torch,
the peak WebGPU memory (``webgrad.webgpu.max_memory_allocated``) over the table's size, and
the largest difference of the trained table between webgpu and cpu. The gradient is dense
(as torch's ``sparse=False``): each step reads and writes the whole table, so it measures
memory bandwidth on the device; llvmpipe is the CPU, so webgpu here is no faster than cpu.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import webgrad
from webgrad import nn

BAG, BATCH, CLASSES = 16, 64, 10


def batches(rows, steps, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, rows, (BATCH, BAG)), rng.integers(0, CLASSES, BATCH)) for _ in range(steps)]


def webgrad_model(rows, dim, device, optimizer):
    webgrad.manual_seed(0)
    table, head = nn.Embedding(rows, dim), nn.Linear(dim, CLASSES)
    table.weight.data = webgrad.tensor(np.random.default_rng(1).standard_normal((rows, dim), dtype=np.float32))
    table.to(device)
    head.to(device)
    params = [*table.parameters(), *head.parameters()]
    opt = webgrad.optim.Adam(params, lr=1e-3) if optimizer == "adam" else webgrad.optim.SGD(params, lr=0.5)

    def step(index, target):
        loss = nn.functional.cross_entropy(head(table(webgrad.tensor(index, device=device)).mean(1)),
                                           webgrad.tensor(target, device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step, table


def torch_model(rows, dim, optimizer):
    import torch

    torch.manual_seed(0)
    table, head = torch.nn.Embedding(rows, dim), torch.nn.Linear(dim, CLASSES)
    with torch.no_grad():
        table.weight.copy_(torch.from_numpy(np.random.default_rng(1).standard_normal((rows, dim), dtype=np.float32)))
    params = [*table.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3) if optimizer == "adam" else torch.optim.SGD(params, lr=0.5)

    def step(index, target):
        loss = torch.nn.functional.cross_entropy(head(table(torch.from_numpy(index)).mean(1)),
                                                 torch.from_numpy(target))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step, table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=300)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    rows = args.mib * 2**20 // (4 * args.dim)
    data = batches(rows, args.steps + 1)
    with webgrad.webgpu.override_limits() as limits:  # nothing overridden: the adapter's own
        binding = limits["max_storage_buffer_binding_size"]
    print(f"table {rows} x {args.dim} float32 = {rows * args.dim * 4 / 2**20:.0f} MiB "
          f"(one binding: {binding / 2**20:.0f} MiB), {args.optimizer}, batch {BATCH} bags of {BAG}")

    runs = {"webgpu": webgrad_model(rows, args.dim, "webgpu", args.optimizer),
            "cpu": webgrad_model(rows, args.dim, "cpu", args.optimizer)}
    try:
        runs["torch"] = torch_model(rows, args.dim, args.optimizer)
    except ImportError:
        print("torch is not installed: no torch column")
    times: dict = {name: [] for name in runs}
    losses: dict = {name: [] for name in runs}
    webgrad.webgpu.reset_peak_memory_stats()
    for index, target in data:  # the first step (compiles kernels, makes optimizer state) is not timed
        for name, (step, _) in runs.items():
            start = time.perf_counter()
            losses[name].append(step(index, target))
            times[name].append(time.perf_counter() - start)
    ms = {name: 1e3 * statistics.median(t[1:]) for name, t in times.items()}
    peak = webgrad.webgpu.max_memory_allocated() / (rows * args.dim * 4)
    trained = {name: runs[name][1].weight.detach().cpu().numpy() for name in ("webgpu", "cpu")}
    print(" ".join(f"{name} {value:.0f} ms/step" for name, value in ms.items()))
    if "torch" in ms:
        print(f"ratio vs torch cpu: webgpu {ms['webgpu'] / ms['torch']:.2f}x, cpu {ms['cpu'] / ms['torch']:.2f}x")
    difference = np.abs(trained["webgpu"] - trained["cpu"]).max()
    print(f"peak webgpu memory {peak:.2f}x the table; final loss webgpu {losses['webgpu'][-1]:.4f} "
          f"cpu {losses['cpu'][-1]:.4f}; table difference webgpu vs cpu {difference:.2e}")


if __name__ == "__main__":
    main()
