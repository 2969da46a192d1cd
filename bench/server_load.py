"""Load on the model server over loopback: 50 concurrent clients for 10 s.

Starts ``python -m server`` in a subprocess with an empty model store in a
temporary folder, stores three small models, then mixes GET /api/models, GET
weights and GET a static file. Prints throughput and latency percentiles (the
client runs on the same machine, so these are relative numbers).

    python bench/server_load.py [--clients 50] [--seconds 10]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.loadgen import run_load  # noqa: E402
from server.testing import running_server_process, safetensors_bytes  # noqa: E402


def static_path() -> str:
    """A static file that exists in every checkout: the first WGSL kernel."""
    kernels = sorted(Path(__file__).resolve().parent.parent.joinpath("wgsl_kernels").glob("*.wgsl"))
    return f"/wgsl/{kernels[0].name}"


def seed_models(base: str, count: int = 3) -> dict[str, int]:
    sizes = {}
    with httpx.Client(base_url=base, headers={"X-Webgrad-Client": "1"}) as client:  # writes need it
        for index in range(count):
            blob = safetensors_bytes(seed=index, shape=(64, 64))
            response = client.put(f"/api/models/load-{index}", files={"weights": ("m.safetensors", blob)},
                                  data={"metadata": f'{{"index": {index}}}'})
            response.raise_for_status()
            sizes[f"/api/models/load-{index}/weights"] = len(blob)
    return sizes


def measure(clients: int, seconds: float, max_requests: int):
    with tempfile.TemporaryDirectory(prefix="webgrad-load-") as data:
        with running_server_process(["--data", data]) as base:
            sizes = seed_models(base)
            paths = ["/api/models", *sizes, static_path()]
            return run_load(base, paths, clients=clients, duration_s=seconds, max_requests=max_requests,
                            expected_sizes=sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    args = parser.parse_args()
    result = measure(args.clients, args.seconds, args.max_requests)
    print(f"server load, {args.clients} clients: {result.summary()}")
    for sample in result.error_samples:
        print("  error:", sample)


if __name__ == "__main__":
    main()
