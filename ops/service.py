"""The ops process: the API and console on uvicorn, /metrics on its own port, the gauges.

:class:`OpsServer` binds its socket itself (so a taken port is an ``OSError`` at
start, and tests can bind port 0) and leaves signals to :class:`pipeline.runtime.Shutdown`:
on SIGTERM uvicorn stops accepting, finishes in-flight requests, and the
process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import asyncpg
import uvicorn
from temporalio.client import Client

from ops import gauges
from ops.app import OpsDeps, create_app
from ops.identity import console_url
from ops.settings import OpsSettings
from pipeline.clients import db_pool, temporal_client
from pipeline.runtime import Shutdown, serve_http
from pipeline.settings import Settings

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # Shutdown handles them
        yield


class OpsServer:
    """The API on ``ops.host:ops.port`` (0 picks a free port: see :attr:`port`)."""

    def __init__(self, deps: OpsDeps) -> None:
        self.deps = deps
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((deps.ops.host, deps.ops.port))
        try:  # built once the port is known: the loopback Host names carry it (ops.guard)
            app = create_app(deps, port=self.port)
        except BaseException:
            self._sock.close()
            raise
        config = uvicorn.Config(app, log_config=None, lifespan="off", timeout_graceful_shutdown=10)
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.deps.ops.host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the ops API stopped while starting")
            await asyncio.sleep(0.02)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._sock.close()


async def run_ops(
    settings: Settings,
    ops: OpsSettings,
    shutdown: Shutdown,
    *,
    client: Client | None = None,
    pool: asyncpg.Pool | None = None,
    console_token: str | None = None,
) -> int:
    """Serve until ``shutdown``; returns the exit code. Raises Unreachable / OSError.

    ``console_token``: the token ``--insecure-local`` made for this process; the console
    URL with it is printed to stdout once the API listens (never logged)."""
    client = client or await temporal_client(settings.temporal)
    own_pool = pool is None
    pool = pool or await db_pool(settings.database)
    server = OpsServer(OpsDeps(client, pool, settings, ops))
    stop_gauges = asyncio.Event()
    metrics = None
    try:
        await server.start()
        metrics = await serve_http(
            settings.process.metrics_host,
            settings.process.metrics_port,
            ready=lambda: server.running and not shutdown.requested,
        )
        refresher = asyncio.create_task(
            gauges.refresh_forever(pool, ops.gauge_interval_seconds, stop_gauges)
        )
        log.info("ops API and console on %s (who may act: %s)", server.url, _auth_modes(ops))
        if ops.host_allowed(server.port) is None:
            log.warning("ops API: any Host is served: set INGEST_OPS_ALLOWED_HOSTS to its names")
        if console_token is not None:
            print(f"ops console (this process's token in the link): "
                  f"{console_url(ops.host, server.port, console_token)}", flush=True)  # fmt: skip
        await shutdown.wait()
        stop_gauges.set()
        await refresher
    finally:
        await server.stop()
        if metrics is not None:
            metrics.close()
        if own_pool:
            await pool.close()
    log.info("ops service stopped")
    return 0


def _auth_modes(ops: OpsSettings) -> str:
    modes = []
    if ops.token is not None:
        modes.append(f"the shared token as {ops.token_name!r}")
    if ops.tokens_file is not None:
        modes.append(f"personal tokens from {ops.tokens_file}")
    if ops.identity_header:
        modes.append(f"{ops.identity_header} from {ops.trusted_proxies}")
    return "; ".join(modes) or "nobody"
