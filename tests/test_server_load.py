"""A short load test of the server on loopback: 50 concurrent clients for 10 s.

The server runs in its own process (``python -m server``, an empty model store
in a temporary folder, three small models stored first); the clients mix GET
/api/models, GET weights (checked for size) and GET a static file. Zero errors
are required; latency is printed, never asserted (this machine is shared).
"""
from __future__ import annotations

import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `server` is not installed

from server.loadgen import run_load
from server.testing import running_server_process, safetensors_bytes

REPO = Path(__file__).resolve().parent.parent
CLIENTS = 50
DURATION_S = 10.0
MAX_REQUESTS = 100_000


def test_fifty_clients_for_ten_seconds(tmp_path, capsys):
    kernels = sorted((REPO / "wgsl_kernels").glob("*.wgsl"))
    assert kernels, "no WGSL kernel to serve as the static file"
    with running_server_process(["--data", str(tmp_path / "data")]) as base:
        sizes = {}
        with httpx.Client(base_url=base, timeout=30, headers={"X-Webgrad-Client": "1"}) as client:
            for index in range(3):
                blob = safetensors_bytes(seed=index, shape=(64, 64))
                response = client.put(f"/api/models/load-{index}", files={"weights": ("m.safetensors", blob)},
                                      data={"metadata": f'{{"index": {index}}}'})
                assert response.status_code == 201, response.text
                sizes[f"/api/models/load-{index}/weights"] = len(blob)
        paths = ["/api/models", *sizes, f"/wgsl/{kernels[0].name}"]
        result = run_load(base, paths, clients=CLIENTS, duration_s=DURATION_S, max_requests=MAX_REQUESTS,
                          expected_sizes=sizes)
    with capsys.disabled():  # shown in every run, not only on failure
        print(f"\nserver load, {CLIENTS} clients on loopback: {result.summary()}")
    assert result.requests > 0
    assert result.errors == 0, result.error_samples
    assert set(result.by_path) == set(paths)
