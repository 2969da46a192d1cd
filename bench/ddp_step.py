"""Data-parallel training step: the digits CNN (bench/cnn_step.py's) under
DistributedDataParallel with 1, 2 and 4 processes at the same per-process batch,
launched by torchrun, printed as time per step against one process.

"overlapped" is DDP as shipped (small buckets, each all-reduced as soon as its
gradients are final, while backward goes on); "after backward" puts every
gradient in one bucket, so communication starts only when backward ends;
"no DDP" runs the same processes without communicating: what sharing the
machine costs, so overlapped / no DDP is what communication adds.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/ddp_step.py [--batch 64] [--steps 30]

Every process runs one BLAS thread (torchrun's OMP_NUM_THREADS=1), so N processes
need N cores to run side by side; past the core count the ratio measures sharing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import webgrad
import webgrad.distributed as dist
from webgrad import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_step import digits_cnn  # noqa: E402


def worker(args) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    webgrad.manual_seed(0)
    model = digits_cnn(webgrad)
    if args.mode != "alone":
        cap = 1000.0 if args.mode == "one-bucket" else args.bucket_cap_mb
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
    opt = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    x = webgrad.randn(args.batch, 1, 8, 8)
    y = webgrad.randint(0, 10, (args.batch,))
    times = []
    for _ in range(args.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        nn.functional.nll_loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    if rank == 0:
        print(f"STEP {statistics.median(times[5:])}", flush=True)
    dist.destroy_process_group()


def launch(nproc: int, args, mode: str) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           __file__, "--worker", "--batch", str(args.batch), "--steps", str(args.steps),
           "--bucket-cap-mb", str(args.bucket_cap_mb), "--mode", mode]
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = [line for line in run.stdout.splitlines() if line.startswith("STEP ")]
    if run.returncode or not lines:
        raise SystemExit(f"torchrun with {nproc} processes failed:\n{run.stderr[-3000:]}")
    return float(lines[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="per-process batch")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's default")
    parser.add_argument("--mode", choices=["overlapped", "one-bucket", "alone"], default="overlapped")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--processes", default="1,2,4")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print(f"digits CNN, per-process batch {args.batch}, {os.cpu_count()} cores, gloo over loopback")
    launch(1, args, "alone")  # warm-up: the first launch on a machine runs slower
    base = None
    print(f"{'processes':>9}  {'overlapped':>10}  {'after backward':>14}  {'no DDP':>8}  "
          f"{'overlapped / 1 process':>22}  {'overlapped / no DDP':>19}")
    for n in (int(p) for p in args.processes.split(",")):
        overlapped, after, alone = (launch(n, args, mode) for mode in ("overlapped", "one-bucket", "alone"))
        base = base or alone  # the first row's single process without DDP
        print(f"{n:>9}  {overlapped * 1e3:>8.2f}ms  {after * 1e3:>12.2f}ms  {alone * 1e3:>6.2f}ms  "
              f"{overlapped / base:>21.2f}x  {overlapped / alone:>18.2f}x")


if __name__ == "__main__":
    main()
