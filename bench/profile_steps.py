"""Where the digits MLP and CNN training steps spend their time: webgrad.profiler's
breakdown per op and per WebGPU kernel, eager and compiled (webgrad.compile), on cpu
and webgpu, with dispatches per step. Also the profiler's own cost per op.

    python bench/profile_steps.py [--devices cpu,webgpu] [--models mlp,cnn] [--steps 5] [--rows 12]

Models as demos/digits_mlp.py and demos/digits_cnn.py (batch 64, Adam), on random
data of the digits' shapes. Timings without the profiler are measured in the same
run; the profiled step is slower (each op is timed, and with timestamp queries each
WebGPU dispatch runs in its own compute pass).
"""
from __future__ import annotations

import argparse
import gc
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script

import webgrad  # noqa: E402
from webgrad import nn  # noqa: E402
from webgrad.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from demos.digits_cnn import DigitsCNN  # noqa: E402
from demos.digits_mlp import build_model  # noqa: E402

BATCH = 64


def make_step(model_name: str, device: str, compiled: bool):
    webgrad.manual_seed(0)
    model = (build_model() if model_name == "mlp" else DigitsCNN()).to(device)
    optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = webgrad.tensor(rng.random((BATCH, 64), dtype=np.float32), device=device)
    y = webgrad.tensor(rng.integers(0, 10, BATCH), device=device)

    def train_step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    fn = webgrad.compile(train_step) if compiled else train_step
    return lambda: fn(x, y).item()  # the read waits for the device: a step's full cost


def seconds_per_step(step, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def device_counters(device: str):
    if device != "webgpu":
        return None
    d = webgrad.backend.get_backend("webgpu").device
    return d.dispatches, d.submits, getattr(d, "reads", 0)


def run_config(model_name, device, compiled, steps, rows):
    """Time and profile one configuration (with the garbage collector paused, as timeit does)."""
    gc.collect()
    gc.disable()
    try:
        return _run_config(model_name, device, compiled, steps, rows)
    finally:
        gc.enable()


def _run_config(model_name, device, compiled, steps, rows):
    step = make_step(model_name, device, compiled)
    for _ in range(3):  # warm up: pipelines, pools, the compiled trace
        step()
    plain = seconds_per_step(step, max(steps, 5))
    before = device_counters(device)
    step()
    after = device_counters(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.WEBGPU] if device == "webgpu" else [])
    with profile(activities=activities):  # the first profiled step warms the timed passes
        step()
    with profile(activities=activities, profile_memory=True) as prof:
        for _ in range(steps):
            with record_function("train_step"):
                step()
            prof.step()
    averages = prof.key_averages()
    total = averages.total_average()
    profiled = sum(e.cpu_time_total for e in prof.events() if e.name == "train_step") / steps / 1e6
    mode = "compiled" if compiled else "eager"
    print(f"\n=== {model_name.upper()} step, {device}, {mode}: {plain * 1e3:.2f} ms/step unprofiled, "
          f"{profiled * 1e3:.2f} ms/step profiled ===")
    sort = "self_device_time_total" if device == "webgpu" and total.self_device_time_total else "self_cpu_time_total"
    print(averages.table(sort_by=sort, row_limit=rows, max_name_column_width=40))
    summary = {"model": model_name, "device": device, "mode": mode, "ms": plain * 1e3}
    if before is not None:
        summary.update(dispatches=after[0] - before[0], submits=after[1] - before[1], reads=after[2] - before[2],
                       gpu_ms=total.self_device_time_total / steps / 1e3)
    peaks = prof.memory_stats()  # from op outputs: a compiled replay has no per-op events
    summary["peak_kb"] = max(peaks.values()) / 1024 if peaks else None
    return summary


def op_overhead(repeats: int = 500, rounds: int = 30) -> tuple[float, float, float]:
    """Best ns per tiny cpu add, the three cases interleaved round by round (this machine
    is shared): no profile, a profile recording, one recording shapes and memory."""
    a, b = webgrad.ones(4), webgrad.ones(4)
    cpu = [ProfilerActivity.CPU]
    best = [float("inf")] * 3
    for _ in range(rounds):
        for i, kwargs in enumerate((None, {}, {"record_shapes": True, "profile_memory": True})):
            prof = None if kwargs is None else profile(activities=cpu, **kwargs)
            if prof is not None:
                prof.start()
            start = time.perf_counter_ns()
            for _ in range(repeats):
                a + b
            best[i] = min(best[i], (time.perf_counter_ns() - start) / repeats)
            if prof is not None:
                prof.stop()
    return best[0], best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="cpu,webgpu")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=12)
    args = parser.parse_args()
    devices = [d for d in args.devices.split(",") if d != "webgpu" or webgrad.webgpu.is_available()]
    modes = [False, True] if hasattr(webgrad, "compile") else [False]
    summaries = []
    for model_name in args.models.split(","):
        for device in devices:
            for compiled in modes:
                summaries.append(run_config(model_name, device, compiled, args.steps, args.rows))

    print("\n=== summary (unprofiled ms/step; dispatches, submits and reads per step on webgpu; GPU ms/step from "
          "the profiled steps) ===")
    print(f"{'model':6} {'device':7} {'mode':9} {'ms/step':>9} {'vs eager':>9} {'dispatches':>11} {'submits':>8} "
          f"{'reads':>6} {'GPU ms':>8} {'peak KB':>8}")
    eager = {(s["model"], s["device"]): s["ms"] for s in summaries if s["mode"] == "eager"}
    for s in summaries:
        speedup = eager[(s["model"], s["device"])] / s["ms"]
        gpu = (f"{s['dispatches']:>11} {s['submits']:>8} {s['reads']:>6} {s['gpu_ms']:>8.2f}"
               if "dispatches" in s else f"{'-':>11} {'-':>8} {'-':>6} {'-':>8}")
        peak = "-" if s["peak_kb"] is None else f"{s['peak_kb']:.1f}"
        print(f"{s['model']:6} {s['device']:7} {s['mode']:9} {s['ms']:>9.2f} {speedup:>8.2f}x {gpu} {peak:>8}")
    plain, recording, full = op_overhead()
    print(f"\nper-op cost (tiny cpu add): {plain:.0f} ns without a profile; {recording:.0f} ns recording "
          f"({recording / plain:.1f}x); {full:.0f} ns recording shapes and memory ({full / plain:.1f}x)")


if __name__ == "__main__":
    main()
