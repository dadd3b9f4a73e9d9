"""Which Temporal server a bench.e2e run measures (``--temporal dev|server``).

* ``dev``: the stack's ``temporal server start-dev`` at ``TEMPORAL_ADDRESS`` (one
  history shard, SQLite, one process). Its Prometheus metrics are on a port the CLI
  picks at random; it is found among the process's listening ports.
* ``server``: a private real server (``go.temporal.io/server``, the stack's cached
  build) started for the run on free ports, in the ``single`` or ``split`` shape,
  with ``shards`` history shards and two databases of its own on the stack's
  PostgreSQL, so the run controls the shard count and reads the databases'
  transaction counts alone; it is stopped and its databases dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.settings import HOST
from devstack.temporal_server import databases, plan

from bench.e2e.probe import find_pids
from bench.e2e.server_counters import ServerCounters
from tests.support.temporal_server import discard, private_server

KINDS = ("dev", "server")


@dataclass(frozen=True)
class Target:
    """The server under test: where it answers, its processes and its counters."""

    kind: str  # "dev" or "server"
    address: str
    shards: int  # history shards (the dev server has one)
    shape: str  # "single" (one process) or "split"
    pids: tuple[int, ...]
    counters: ServerCounters

    def label(self) -> str:
        return f"{self.kind} ({self.shards} shard{'s' if self.shards > 1 else ''}, {self.shape})"


def _listening_ports(pid: int) -> list[int]:
    """The TCP ports ``pid`` listens on (Linux ``/proc``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(set(ports))


def _serves_metrics(port: int) -> bool:
    try:
        url = f"http://{HOST}:{port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as resp:
            return b"persistence_requests" in resp.read()
    except OSError:
        return False


def dev_metrics_urls(pids: tuple[int, ...]) -> list[str]:
    """The dev server's ``/metrics`` URLs (empty if it serves none)."""
    ports = [port for pid in pids for port in _listening_ports(pid)]
    return [f"http://{HOST}:{p}/metrics" for p in ports if _serves_metrics(p)]


@asynccontextmanager
async def target(
    kind: str, *, address: str, namespace: str, pg_url: str, shards: int, shape: str = "single"
) -> AsyncIterator[Target]:
    """The server of ``kind``, ready; a private real server is discarded on exit."""
    if kind == "dev":
        pids = tuple(find_pids(int(address.rpartition(":")[2]))["temporal"])
        counters = ServerCounters(dev_metrics_urls(pids), namespace)
        yield Target("dev", address, 1, "single", pids, counters)
        return
    home = Path(tempfile.mkdtemp(prefix="bench-tserver-"))
    server = private_server(home, shape=shape, shards=shards)
    try:
        await asyncio.to_thread(server.ensure)
        pids = tuple(pid for p in server.started_procs() if (pid := p.pid()) is not None)
        urls = [f"http://{HOST}:{sp.metrics_port}/metrics" for sp in plan(server.cfg)]
        counters = ServerCounters(urls, namespace, pg_url, tuple(databases(server.cfg)))
        yield Target("server", server.address, shards, shape, pids, counters)
    finally:
        await discard(server, pg_url)
        shutil.rmtree(home, ignore_errors=True)
