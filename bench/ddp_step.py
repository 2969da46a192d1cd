"""Data-parallel training step: the digits CNN (bench/cnn_step.py's) under
DistributedDataParallel with 1, 2 and 4 processes at the same per-process batch,
launched by torchrun, printed as time per step against one process.

Each launch measures three kinds of step in turns, --rounds rounds, so that all three see
the same machine (launches a minute apart differed by up to 1.5x on a shared VM for the
same work):

- "1 process": rank 0 trains an undistributed copy of the model while the other ranks wait
  at a barrier;
- "no DDP": every rank trains its undistributed copy at once, without communicating: what
  sharing the machine costs;
- the DDP step: "overlapped" is DDP as shipped (small buckets, each all-reduced as soon as
  its gradients are final, while backward goes on), "after backward" puts every gradient in
  one bucket, so communication starts only when backward ends (its own launch).

So overlapped / 1 process is the goal's ratio and overlapped / no DDP what communication
adds. torch's own DistributedDataParallel runs the same model the same ways in the same run,
the peer.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/ddp_step.py [--batch 64] [--processes 1,2,4]

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
    cap = 1000.0 if args.mode == "one-bucket" else args.bucket_cap_mb
    model = lib.nn.parallel.DistributedDataParallel(digits_cnn(lib), bucket_cap_mb=cap)
    x = lib.randn(args.batch, 1, 8, 8)
    y = lib.randint(0, 10, (args.batch,))
    ddp_step, plain_step = train_step(lib, model, x, y), train_step(lib, digits_cnn(lib), x, y)
    for step in (ddp_step, plain_step):  # warm up
        for _ in range(3):
            step()
    times: dict = {"DDP": [], "ALONE": [], "APART": []}
    per_round = max(args.steps // args.rounds, 1)
    for _ in range(args.rounds):
        group.barrier()
        if rank == 0:
            times["ALONE"] += [seconds(plain_step) for _ in range(per_round)]
        for kind, step in (("APART", plain_step), ("DDP", ddp_step)):
            for _ in range(per_round):
                group.barrier()  # the ranks start each step together, as DDP's all-reduce makes them
                times[kind].append(seconds(step))
    if rank == 0:
        print(" ".join(f"{name} {statistics.median(t)}" for name, t in times.items()), flush=True)
    group.destroy_process_group()


def train_step(lib, model, x, y):
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        lib.nn.functional.nll_loss(model(x), y).backward()
        opt.step()
    return step


def seconds(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def launch(nproc: int, args, mode: str, lib: str = "webgrad") -> dict:
    """Rank 0's median seconds per step of each kind: {"DDP": ..., "ALONE": ..., "APART": ...}."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           __file__, "--worker", "--batch", str(args.batch), "--steps", str(args.steps), "--rounds", str(args.rounds),
           "--bucket-cap-mb", str(args.bucket_cap_mb), "--mode", mode, "--lib", lib]
    # Now and then a worker of torch's own DDP aborts here ("terminate called without an active
    # exception", inside torch): run it again.
    for _attempt in range(3):
        run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        lines = [line.split() for line in run.stdout.splitlines() if line.startswith("DDP ")]
        if not run.returncode and lines:
            return {name: float(value) for name, value in zip(lines[-1][::2], lines[-1][1::2])}
    raise SystemExit(f"torchrun with {nproc} processes failed:\n{run.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="per-process batch")
    parser.add_argument("--steps", type=int, default=60, help="timed steps of each kind")
    parser.add_argument("--rounds", type=int, default=6, help="turns of alone and distributed steps")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's default")
    parser.add_argument("--mode", choices=["overlapped", "one-bucket"], default="overlapped")
    parser.add_argument("--lib", choices=["webgrad", "torch"], default="webgrad")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--processes", default="1,2,4")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print(f"digits CNN, per-process batch {args.batch}, {os.cpu_count()} cores, gloo over loopback")
    launch(1, args, "overlapped")  # warm-up: the first launch on a machine runs slower
    print(f"{'':7} {'processes':>9}  {'overlapped':>10}  {'after backward':>14}  {'no DDP':>8}  {'1 process':>9}  "
          f"{'overlapped / 1 process':>22}  {'overlapped / no DDP':>19}")
    for n in (int(p) for p in args.processes.split(",")):
        for lib in ("webgrad", "torch"):
            overlapped, after = (launch(n, args, mode, lib) for mode in ("overlapped", "one-bucket"))
            ddp, alone, apart = overlapped["DDP"], overlapped["ALONE"], overlapped["APART"]
            print(f"{lib:7} {n:>9}  {ddp * 1e3:>8.2f}ms  {after['DDP'] * 1e3:>12.2f}ms  {apart * 1e3:>6.2f}ms  "
                  f"{alone * 1e3:>7.2f}ms  {ddp / alone:>21.2f}x  {ddp / apart:>18.2f}x", flush=True)

if __name__ == "__main__":
    main()
