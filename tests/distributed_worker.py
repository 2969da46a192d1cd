"""One rank of the multi-process tests in test_distributed.py (run by torchrun, or with
RANK/WORLD_SIZE/MASTER_* set by the test). ``python distributed_worker.py SCENARIO OUT_DIR [DEVICE]``
writes what this rank saw to OUT_DIR/SCENARIO-RANK.json."""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

import webgrad
import webgrad.distributed as dist
from webgrad import nn
from webgrad.utils.data import DataLoader, DistributedSampler, TensorDataset

GLOBAL_BATCH = 32


def mlp():
    webgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))


def digits_loader(rank, world, device):
    x, y = webgrad.datasets.digits("train")
    dataset = TensorDataset(x[:640].to(device), y[:640].to(device))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    return DataLoader(dataset, batch_size=GLOBAL_BATCH // world, sampler=sampler)


def train(model, loader, steps, lr=0.1, compiled=False):
    opt = webgrad.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step(xb, yb):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    step = webgrad.compile(step) if compiled else step
    return [step(xb, yb).item() for _, (xb, yb) in zip(range(steps), loader)]


def flat_params(module):
    return np.concatenate([p.detach().cpu().numpy().ravel() for p in module.parameters()]).tolist()


def collectives(rank, world, device):
    seen = {}
    for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
        t = webgrad.tensor([rank + 1.0, -(rank + 1.0), 2.0], device=device)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        seen[op] = t.tolist()
    t = webgrad.full((3,), float(rank), device=device)
    dist.broadcast(t, src=world - 1)
    seen["broadcast"] = t.tolist()
    outs = [webgrad.zeros(2, device=device) for _ in range(world)]
    dist.all_gather(outs, webgrad.full((2,), rank * 10.0, device=device))
    seen["all_gather"] = [o.tolist() for o in outs]
    out = webgrad.zeros(world * 2, device=device)
    dist.all_gather_into_tensor(out, webgrad.full((2,), rank * 10.0, device=device))
    seen["all_gather_into_tensor"] = out.tolist()
    out = webgrad.zeros(2, device=device)
    dist.reduce_scatter(out, [webgrad.full((2,), float(rank + r), device=device) for r in range(world)])
    seen["reduce_scatter"] = out.tolist()
    out = webgrad.zeros(2, device=device)
    dist.reduce_scatter_tensor(out, webgrad.arange(world * 2.0, device=device) * (rank + 1))
    seen["reduce_scatter_tensor"] = out.tolist()
    t = webgrad.ones(4, dtype=webgrad.int64, device=device) * rank
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    seen["async_int64"] = t.tolist()
    group = dist.new_group([0, 1])
    t = webgrad.ones(1, device=device) * (rank + 1)
    if rank in (0, 1):
        dist.all_reduce(t, group=group)
    seen["new_group"] = t.tolist()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    seen["objects"] = objects
    dist.barrier()
    return seen


def ddp_train(rank, world, device):
    model = nn.parallel.DistributedDataParallel(mlp().to(device), bucket_cap_mb=0.001)  # several buckets
    losses = train(model, digits_loader(rank, world, device), steps=20)
    return {"params": flat_params(model.module), "losses": losses}


def ddp_compiled(rank, world, device):
    """The same training with the step under webgrad.compile: communication is a graph break,
    never a replay that skips it."""
    import warnings

    model = nn.parallel.DistributedDataParallel(mlp().to(device), bucket_cap_mb=0.001)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the graph-break warning
        losses = train(model, digits_loader(rank, world, device), steps=20, compiled=True)
    return {"params": flat_params(model.module), "losses": losses}


def ddp_features(rank, world, device):
    """no_sync accumulation, find_unused_parameters, broadcast_buffers, the unused-parameter error."""
    seen = {}
    webgrad.manual_seed(rank)  # different starting weights: DDP must broadcast rank 0's
    model = nn.parallel.DistributedDataParallel(nn.Linear(3, 2).to(device))
    x = webgrad.ones(4, 3, device=device) * (rank + 1)
    with model.no_sync():
        model(x).sum().backward()
    seen["no_sync_grad"] = model.module.weight.grad.tolist()  # local only: 4 * (rank + 1)
    model(x).sum().backward()
    seen["synced_grad"] = model.module.weight.grad.tolist()   # mean of both local sums
    seen["weight"] = model.module.weight.tolist()

    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 1), nn.Linear(3, 1)

        def forward(self, x, use_b):
            return self.b(x) if use_b else self.a(x)

    webgrad.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Branches().to(device), find_unused_parameters=True)
    model(x, use_b=rank == 1).sum().backward()
    seen["unused_a_grad"] = model.module.a.weight.grad.tolist()
    seen["unused_b_grad"] = model.module.b.weight.grad.tolist()
    webgrad.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).to(device))
    model.module[1].running_mean.fill_(float(rank))
    model.eval()(x)  # broadcasts the buffers first; eval leaves them as they came
    seen["running_mean"] = model.module[1].running_mean.tolist()
    model = nn.parallel.DistributedDataParallel(Branches().to(device))
    model(x, use_b=False).sum().backward()
    try:
        model(x, use_b=False)
        seen["unused_error"] = None
    except RuntimeError as error:
        seen["unused_error"] = str(error)
    return seen


def dies(rank, world, device):
    """Rank 1 dies after joining; the others must fail with a message naming it."""
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(1)
    start = time.monotonic()
    try:
        dist.all_reduce(webgrad.ones(3, device=device))
        return {"error": None}
    except RuntimeError as error:
        return {"error": str(error), "seconds": time.monotonic() - start}


def checkpoint_chain(rank, world, device):
    """Continue training from the checkpoint in $CHAIN_IN (if any) for 2 steps; rank 0 saves to $CHAIN_OUT."""
    model = mlp().to(device)
    if os.environ.get("CHAIN_IN"):
        model.load_state_dict(webgrad.load(os.environ["CHAIN_IN"]))
    ddp = nn.parallel.DistributedDataParallel(model)
    loader = digits_loader(rank, world, device)
    skip = int(os.environ.get("CHAIN_SKIP", "0"))
    batches = (batch for i, batch in enumerate(loader) if i >= skip)
    opt = webgrad.optim.SGD(ddp.parameters(), lr=0.1)
    for _, (xb, yb) in zip(range(2), batches):
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(xb), yb).backward()
        opt.step()
    if rank == 0:
        webgrad.save(ddp.module.state_dict(), os.environ["CHAIN_OUT"])
    dist.barrier()
    return {"params": flat_params(model)}


def restarts(rank, world, device):
    """Epochs of 4 steps with a checkpoint after each; on torchrun's first attempt rank 1 is
    killed in epoch 1. The restarted workers resume from the last checkpoint."""
    path = os.path.join(OUT, "restart-checkpoint.safetensors")
    model = mlp().to(device)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = webgrad.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    first_epoch = 0
    if os.path.exists(path):
        state = webgrad.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first_epoch = int(state["epoch"]) + 1
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    x, y = webgrad.datasets.digits("train")
    dataset = TensorDataset(x[:512].to(device), y[:512].to(device))
    sampler = DistributedSampler(dataset, shuffle=True, seed=7)
    loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // world, sampler=sampler)
    for epoch in range(first_epoch, 3):
        sampler.set_epoch(epoch)
        for step, (xb, yb) in zip(range(4), loader):
            if os.environ.get("KILL_RANK_1") and attempt == 0 and rank == 1 and epoch == 1 and step == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(xb), yb).backward()
            opt.step()
        if rank == 0:
            webgrad.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}, path)
        dist.barrier()
    return {"params": flat_params(model), "attempt": attempt, "first_epoch": first_epoch}


if __name__ == "__main__":
    scenario, OUT = sys.argv[1], sys.argv[2]
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    dist.init_process_group("gloo", init_method=os.environ.get("INIT_METHOD"),
                            timeout=int(os.environ.get("PG_TIMEOUT", "60")),
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    result = globals()[scenario](rank, world, device)
    with open(os.path.join(OUT, f"{scenario}-{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
