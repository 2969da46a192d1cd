"""webgrad.distributed, DistributedDataParallel and DistributedSampler across real processes.

Each test starts ranks of tests/distributed_worker.py as a user would (``torchrun``,
or ``RANK``/``WORLD_SIZE``/``MASTER_*`` for ``env://`` and ``tcp://``) and checks
what the ranks wrote against numpy or a single-process run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import webgrad
from conftest import DEVICES, need_module, requires_webgpu

need_module("torch")
WORKER = Path(__file__).with_name("distributed_worker.py")
sys.path.insert(0, str(WORKER.parent))
import distributed_worker as worker  # noqa: E402


def _env(**extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(WORKER.parent), **extra}
    env.pop("WORLD_SIZE", None)
    return env


def _results(out: Path, scenario: str, world: int) -> list[dict]:
    return [json.loads((out / f"{scenario}-{r}.json").read_text()) for r in range(world)]


def torchrun(out: Path, scenario: str, nproc: int, device: str = "cpu", args=(), timeout=240, **env):
    """``torchrun --standalone --nproc-per-node=N worker.py SCENARIO OUT DEVICE``; the ranks' results."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args,
           str(WORKER), scenario, str(out), device]
    run = subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"torchrun failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    return _results(out, scenario, nproc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out: Path, scenario: str, world: int, device="cpu", init_method=None, timeout=120, **env):
    """Start the ranks by hand (no torchrun agent to kill the survivors when one dies)."""
    port = str(_free_port())
    procs = []
    for rank in range(world):
        rank_env = _env(RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **env)
        rank_env["WORLD_SIZE"] = str(world)
        if init_method:
            rank_env["INIT_METHOD"] = init_method.format(port=port)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), scenario, str(out), device], env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=timeout)[0] for p in procs]
    return [p.returncode for p in procs], logs


@pytest.mark.parametrize("device", DEVICES)
def test_collectives_match_numpy(tmp_path, device):
    world = 3
    seen = torchrun(tmp_path, "collectives", world, device)
    values = np.array([[r + 1.0, -(r + 1.0), 2.0] for r in range(world)])
    expected = {"SUM": values.sum(0), "AVG": values.mean(0), "MAX": values.max(0), "MIN": values.min(0),
                "PRODUCT": values.prod(0)}
    for rank, got in enumerate(seen):
        for op, want in expected.items():
            np.testing.assert_allclose(got[op], want, rtol=1e-6, err_msg=f"{op} on rank {rank}")
        assert got["broadcast"] == [world - 1.0] * 3
        assert got["all_gather"] == [[r * 10.0] * 2 for r in range(world)]
        assert got["all_gather_into_tensor"] == [r * 10.0 for r in range(world) for _ in range(2)]
        assert got["reduce_scatter"] == [float(sum(r + rank for r in range(world)))] * 2
        chunk = np.arange(world * 2.0).reshape(world, 2)[rank] * sum(r + 1 for r in range(world))
        assert got["reduce_scatter_tensor"] == chunk.tolist()
        assert got["async_int64"] == [sum(range(world))] * 4
        assert got["new_group"] == ([3.0] if rank < 2 else [rank + 1.0])
        assert got["objects"] == [{"rank": r} for r in range(world)]


def _single_process_params(device, steps=20):
    model = worker.mlp().to(device)
    losses = worker.train(model, worker.digits_loader(0, 1, device), steps=steps)
    return np.array(worker.flat_params(model)), losses


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_matches_one_process_with_the_global_batch(tmp_path, world):
    seen = torchrun(tmp_path, "ddp_train", world)
    want, want_losses = _single_process_params("cpu")
    for rank, got in enumerate(seen):
        np.testing.assert_allclose(got["params"], want, atol=1e-5, err_msg=f"rank {rank} after 20 steps")
    mean_losses = np.mean([got["losses"] for got in seen], axis=0)  # each rank's loss is its share's mean
    np.testing.assert_allclose(mean_losses, want_losses, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_ddp_under_compile_still_communicates(tmp_path, device):
    seen = torchrun(tmp_path, "ddp_compiled", 2, device)
    want, _ = _single_process_params("cpu")
    for got in seen:
        np.testing.assert_allclose(got["params"], want, atol=1e-4)


@requires_webgpu  # under CI=true a missing adapter already fails the run (conftest)
def test_ddp_on_webgpu_matches_one_process(tmp_path):
    seen = torchrun(tmp_path, "ddp_train", 2, "webgpu")
    want, _ = _single_process_params("cpu")
    for got in seen:
        np.testing.assert_allclose(got["params"], want, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_ddp_no_sync_unused_parameters_and_buffers(tmp_path, device):
    seen = torchrun(tmp_path, "ddp_features", 2, device)
    for rank, got in enumerate(seen):
        assert np.allclose(got["no_sync_grad"], 4.0 * (rank + 1))   # local sums, not reduced
        # no_sync's local gradient plus this step's, averaged over the ranks: (4r+4)*2 -> mean 12
        assert np.allclose(got["synced_grad"], 12.0)
        assert got["weight"] == seen[0]["weight"]  # rank 0's initial weights everywhere
        # a.weight is used by rank 0 only, b.weight by rank 1 only: each averages to half a sum
        assert np.allclose(got["unused_a_grad"], 4 * 1 / 2) and np.allclose(got["unused_b_grad"], 4 * 2 / 2)
        assert np.allclose(got["running_mean"], seen[0]["running_mean"])
        assert "b.weight" in got["unused_error"] and "find_unused_parameters=True" in got["unused_error"]


def test_ddp_checkpoints_round_trip_with_torch_ddp(tmp_path):
    """webgrad DDP trains 2 steps -> torch DDP loads the file and trains 2 -> webgrad DDP
    loads torch's file and trains 2: the same parameters as 6 steps in one process."""
    first, second = tmp_path / "webgrad.safetensors", tmp_path / "torch.safetensors"
    torchrun(tmp_path, "checkpoint_chain", 2, CHAIN_OUT=str(first))
    script = tmp_path / "torch_ddp.py"
    script.write_text(TORCH_DDP_SCRIPT)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                          str(script), str(first), str(second)], env=_env(), capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = torchrun(tmp_path, "checkpoint_chain", 2, CHAIN_IN=str(second), CHAIN_OUT=str(tmp_path / "end"),
                    CHAIN_SKIP="4")
    model = worker.mlp()
    opt = webgrad.optim.SGD(model.parameters(), lr=0.1)
    for _, (xb, yb) in zip(range(6), worker.digits_loader(0, 1, "cpu")):
        opt.zero_grad()
        webgrad.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    for got in seen:
        np.testing.assert_allclose(got["params"], worker.flat_params(model), atol=1e-5)


# torch's own DDP continuing webgrad's checkpoint (steps 3-4 of the same data order).
TORCH_DDP_SCRIPT = '''
import sys, torch, torch.distributed as dist, webgrad
from safetensors.torch import load_file, save_file
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))
model.load_state_dict(load_file(sys.argv[1]))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
x, y = webgrad.datasets.digits("train")
x, y = torch.from_numpy(x[:640].numpy()), torch.from_numpy(y[:640].numpy())
sampler = torch.utils.data.DistributedSampler(torch.utils.data.TensorDataset(x, y), shuffle=False)
idx = list(sampler)
per = 32 // world
for step in (2, 3):
    b = idx[step * per:(step + 1) * per]
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x[b]), y[b]).backward()
    opt.step()
if rank == 0:
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, sys.argv[2])
dist.barrier()
dist.destroy_process_group()
'''


def test_torchrun_restart_resumes_from_the_last_checkpoint(tmp_path):
    """Rank 1 is killed mid-epoch; torchrun --max-restarts=1 restarts the group, which resumes
    from the last epoch's checkpoint and ends where an uninterrupted run ends."""
    interrupted = tmp_path / "interrupted"
    clean = tmp_path / "clean"
    interrupted.mkdir()
    clean.mkdir()
    seen = torchrun(interrupted, "restarts", 2, args=["--max-restarts=1"], KILL_RANK_1="1")
    assert all(got["attempt"] == 1 and got["first_epoch"] == 1 for got in seen)  # restarted after epoch 0
    want = torchrun(clean, "restarts", 2)  # never killed
    for got in seen:
        np.testing.assert_allclose(got["params"], want[0]["params"], atol=1e-6)


def test_multi_node_rendezvous(tmp_path):
    """Two torchrun agents, as on two machines (--nnodes=2, c10d rendezvous), one rank each."""
    port = _free_port()
    agents = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}",
                                "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                                "--rdzv-id=webgrad-test", str(WORKER), "collectives", str(tmp_path)],
                               env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for node in (0, 1)]
    logs = [agent.communicate(timeout=180)[0] for agent in agents]
    assert [agent.returncode for agent in agents] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert [got["SUM"] for got in _results(tmp_path, "collectives", 2)] == [[3.0, -3.0, 4.0]] * 2


def test_a_dead_rank_fails_the_others_with_its_name(tmp_path):
    start = time.monotonic()
    codes, logs = launch(tmp_path, "dies", 3, PG_TIMEOUT="30")
    assert codes[1] != 0 and codes[0] == 0 and codes[2] == 0, logs
    for rank in (0, 2):
        error = json.loads((tmp_path / f"dies-{rank}.json").read_text())["error"]
        assert error and "rank 1 stopped answering" in error and f"on rank {rank} of 3" in error, error
    assert time.monotonic() - start < 90


def test_tcp_init_method(tmp_path):
    codes, logs = launch(tmp_path, "collectives", 2, init_method="tcp://127.0.0.1:{port}")
    assert codes == [0, 0], logs
    assert _results(tmp_path, "collectives", 2)[1]["SUM"] == [3.0, -3.0, 4.0]


def test_without_a_process_group():
    import webgrad.distributed as dist
    from webgrad.nn.parallel import DistributedDataParallel as DDP

    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(ValueError, match="backend='nccl'"):
        dist.init_process_group("nccl")
    with pytest.raises(TypeError, match="timeout"):
        dist.init_process_group("gloo", timeout="soon")
    inner = webgrad.nn.Linear(4, 2)
    model = DDP(inner)  # a world of one: the module as it is
    x = webgrad.randn(3, 4)
    assert np.array_equal(model(x).detach().numpy(), inner(x).detach().numpy())


def test_distributed_sampler_matches_torch():
    torch = need_module("torch")
    from webgrad.utils.data import DistributedSampler

    for n, world, drop_last in [(10, 3, False), (10, 3, True), (2, 4, False), (12, 4, False)]:
        ours = [list(DistributedSampler(range(n), world, r, shuffle=False, drop_last=drop_last))
                for r in range(world)]
        theirs = [list(torch.utils.data.DistributedSampler(range(n), world, r, shuffle=False, drop_last=drop_last))
                  for r in range(world)]
        assert ours == theirs
    shares = [DistributedSampler(range(11), 2, r, seed=3) for r in range(2)]
    epoch0 = [list(s) for s in shares]
    assert set(epoch0[0] + epoch0[1]) == set(range(11))  # 12 indices: one repeated to even the shares
    assert len(shares[0]) == 6 and [list(s) for s in shares] == epoch0  # same epoch, same order
    for s in shares:
        s.set_epoch(1)
    assert [list(s) for s in shares] != epoch0
    with pytest.raises(ValueError, match="rank"):
        DistributedSampler(range(4), 2, 2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))
