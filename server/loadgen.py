"""A small HTTP load generator for the server (loopback use only).

``run_load(base, paths, clients=50, duration_s=10, max_requests=200_000)`` starts
``clients`` concurrent keep-alive clients that each request the next of
``paths`` in turn until the time or the request budget runs out, and returns a
``LoadResult`` with counts, errors and latency percentiles. Used by
``tests/test_server_load.py`` and ``bench/server_load.py``.
"""
from __future__ import annotations

import asyncio
import threading
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    by_path: Counter = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    def summary(self) -> str:
        rate = self.requests / self.elapsed_s if self.elapsed_s else 0.0
        mean = statistics.fmean(self.latencies_s) if self.latencies_s else float("nan")
        return (f"{self.requests} requests in {self.elapsed_s:.1f} s ({rate:.0f}/s), {self.errors} errors; "
                f"latency p50 {self.percentile(50) * 1e3:.1f} ms, p99 {self.percentile(99) * 1e3:.1f} ms, "
                f"mean {mean * 1e3:.1f} ms, max {max(self.latencies_s, default=0) * 1e3:.1f} ms")


def run_load(base: str, paths: list[str], clients: int = 50, duration_s: float = 10.0,
             max_requests: int = 200_000, expected_sizes: dict[str, int] | None = None) -> LoadResult:
    """Run the load and return its result. Only loopback hosts are accepted."""
    host = urlsplit(base).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"run_load is for loopback servers only, not {host!r}")
    # A thread of its own: the caller may already run an event loop (Playwright's
    # sync API keeps one alive in the test process).
    results = []
    worker = threading.Thread(target=lambda: results.append(asyncio.run(
        _run(base, paths, clients, duration_s, max_requests, expected_sizes or {}))))
    worker.start()
    worker.join()
    if not results:
        raise RuntimeError("run_load: the load thread failed; see the traceback above")
    return results[0]


class _Connection:
    """One keep-alive HTTP/1.1 connection on asyncio streams: light enough that the
    client does not need more CPU than the server it measures (httpx would)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def get(self, path: str) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode())
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size + 2))
            await self.reader.readuntil(b"\r\n")
            body = b"".join(part[:-2] for part in parts)
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, body

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None


async def _run(base, paths, clients, duration_s, max_requests, expected_sizes) -> LoadResult:
    parts = urlsplit(base)
    result = LoadResult()
    budget = [max_requests]
    started = time.perf_counter()
    deadline = started + duration_s

    async def one_client(offset: int):
        connection = _Connection(parts.hostname, parts.port)
        turn = offset
        try:
            while time.perf_counter() < deadline and budget[0] > 0:
                budget[0] -= 1
                path = paths[turn % len(paths)]
                turn += 1
                begin = time.perf_counter()
                try:
                    status, body = await asyncio.wait_for(connection.get(path), timeout=30)
                    ok = status == 200 and (path not in expected_sizes or len(body) == expected_sizes[path])
                    problem = None if ok else f"{path}: HTTP {status}, {len(body)} bytes"
                except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        asyncio.TimeoutError, ValueError, IndexError) as exc:
                    problem = f"{path}: {type(exc).__name__}: {exc}"
                    await connection.close()
                result.latencies_s.append(time.perf_counter() - begin)
                result.requests += 1
                result.by_path[path] += 1
                if problem:
                    result.errors += 1
                    if len(result.error_samples) < 10:
                        result.error_samples.append(problem)
        finally:
            await connection.close()

    await asyncio.gather(*(one_client(i) for i in range(clients)))
    result.elapsed_s = time.perf_counter() - started
    return result
