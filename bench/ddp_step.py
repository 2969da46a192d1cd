"""Data-parallel training step: the digits CNN (bench/cnn_step.py's) under
DistributedDataParallel with 1, 2 and 4 processes at the same per-process batch,
launched by torchrun, printed as time per step against one process.

"overlapped" is DDP as shipped (small buckets, each all-reduced as soon as its
gradients are final, while backward goes on); "after backward" puts every
gradient in one bucket, so communication starts only when backward ends;
"no DDP" runs the same processes without communicating: what sharing the
machine costs, so overlapped / no DDP is what communication adds. torch's own
DistributedDataParallel runs the same model the same ways in the same run, the peer.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_step import digits_cnn  # noqa: E402


def worker(args) -> None:
    if args.lib == "torch":
        import torch as lib
        import torch.distributed as group

        lib.set_num_threads(1)
    else:
        lib, group = webgrad, dist
    group.init_process_group("gloo")
    rank = group.get_rank()
    lib.manual_seed(0)
    model = digits_cnn(lib)
    if args.mode != "alone":
        cap = 1000.0 if args.mode == "one-bucket" else args.bucket_cap_mb
        model = lib.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x = lib.randn(args.batch, 1, 8, 8)
    y = lib.randint(0, 10, (args.batch,))
    times = []
    for _ in range(args.steps):
        group.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        lib.nn.functional.nll_loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    if rank == 0:
        print(f"STEP {statistics.median(times[5:])}", flush=True)
    group.destroy_process_group()


def launch(nproc: int, args, mode: str, lib: str = "webgrad") -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           __file__, "--worker", "--batch", str(args.batch), "--steps", str(args.steps),
           "--bucket-cap-mb", str(args.bucket_cap_mb), "--mode", mode, "--lib", lib]
    # Now and then a worker of torch's own DDP aborts here ("terminate called without an active
    # exception", inside torch): run it again.
    for _attempt in range(3):
        run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        lines = [line for line in run.stdout.splitlines() if line.startswith("STEP ")]
        if not run.returncode and lines:
            return float(lines[-1].split()[1])
    raise SystemExit(f"torchrun with {nproc} processes failed:\n{run.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="per-process batch")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's default")
    parser.add_argument("--mode", choices=["overlapped", "one-bucket", "alone"], default="overlapped")
    parser.add_argument("--lib", choices=["webgrad", "torch"], default="webgrad")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--processes", default="1,2,4")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print(f"digits CNN, per-process batch {args.batch}, {os.cpu_count()} cores, gloo over loopback")
    launch(1, args, "alone")  # warm-up: the first launch on a machine runs slower
    print(f"{'':7} {'processes':>9}  {'overlapped':>10}  {'after backward':>14}  {'no DDP':>8}  "
          f"{'overlapped / 1 process':>22}  {'overlapped / no DDP':>19}")
    base: dict = {}
    for n in (int(p) for p in args.processes.split(",")):
        for lib in ("webgrad", "torch"):
            overlapped, after, alone = (launch(n, args, mode, lib) for mode in ("overlapped", "one-bucket", "alone"))
            base.setdefault(lib, alone)  # the first row's single process without DDP
            print(f"{lib:7} {n:>9}  {overlapped * 1e3:>8.2f}ms  {after * 1e3:>12.2f}ms  {alone * 1e3:>6.2f}ms  "
                  f"{overlapped / base[lib]:>21.2f}x  {overlapped / alone:>18.2f}x", flush=True)


if __name__ == "__main__":
    main()
