"""Inference of int8 dynamic-quantized Linear layers (webgrad.ao.quantization.quantize_dynamic)
against float32, and against torch's quantized model, in one run: the digits MLP (top-1
agreement on the test split) and a wide MLP (1024 -> 1024 -> 10, batch 64).

    python bench/quantized_inference.py [--device webgpu]

Measure with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset (see bench/mlp_step.py).
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings


import webgrad
from webgrad import nn


def timed(fn, number=50, repeats=5) -> float:
    for _ in range(5):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def measure(name, model, x, device, torch_model=None):
    quantized = webgrad.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=webgrad.qint8)
    with webgrad.no_grad():
        def float_call():
            return model(x).numpy() if device == "cpu" else model(x).cpu().numpy()

        def int8_call():
            return quantized(x).numpy() if device == "cpu" else quantized(x).cpu().numpy()
        agree = (float_call().argmax(-1) == int8_call().argmax(-1)).mean()
        t_float, t_int8 = timed(float_call), timed(int8_call)
    line = (f"{name:12s} float32 {t_float * 1e3:7.3f} ms  int8 {t_int8 * 1e3:7.3f} ms  "
            f"int8/float32 {t_int8 / t_float:.2f}x  top-1 agreement {agree:.4f}")
    if torch_model is not None:
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tq = torch.ao.quantization.quantize_dynamic(torch_model, {torch.nn.Linear}, dtype=torch.qint8)
        tx = torch.tensor(x.cpu().numpy())
        with torch.no_grad():
            t_torch = timed(lambda: tq(tx).numpy())
        line += f"  vs torch int8 {t_int8 / t_torch:.2f}x"
    print(line)


def twins(sizes):
    import torch

    torch.manual_seed(0)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    theirs = torch.nn.Sequential(*layers[:-1])
    ours = nn.Sequential(*[m for pair in ((nn.Linear(a, b), nn.ReLU()) for a, b in zip(sizes, sizes[1:]))
                           for m in pair][:-1])
    ours.load_state_dict({k: webgrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return theirs, ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    device = parser.parse_args().device
    webgrad.manual_seed(0)
    x, y = webgrad.datasets.digits(split="train", device=device)
    tx, _ = webgrad.datasets.digits(split="test", device=device)
    digits = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = webgrad.optim.Adam(digits.parameters(), lr=1e-2)
    for _ in range(100):
        opt.zero_grad()
        nn.functional.cross_entropy(digits(x), y).backward()
        opt.step()
    measure("digits MLP", digits, tx, device)
    theirs, wide = twins([1024, 1024, 10])
    measure("wide MLP", wide.to(device), webgrad.randn(64, 1024, device=device), device, theirs)


if __name__ == "__main__":
    main()
