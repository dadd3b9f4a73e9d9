"""Process plumbing shared by every long-running command.

* :class:`Shutdown` turns SIGTERM/SIGINT into an ``asyncio.Event`` so loops can
  drain in-flight work, commit, and exit 0.
* :func:`serve_http` serves ``/metrics`` (Prometheus), ``/healthz`` (the
  process is alive) and ``/readyz`` (started, and no retry loop waiting out a
  dependency's failure: ``pipeline.retry.RETRYING``) on one port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from pipeline.retry import RETRYING
from pipeline.settings import METRICS_PORT_ENV, ConfigError

log = logging.getLogger(__name__)


class BindError(ConfigError):
    """A port this process must listen on is taken (or not allowed): the message names
    the variable that sets it, and the process exits 2 like for any bad setting."""

    def __init__(self, variable: str, host: str, port: int, exc: BaseException) -> None:
        reason = getattr(exc, "strerror", None) or str(exc)
        super().__init__(
            f"{variable}={port}: cannot listen on {host}:{port}: {reason} "
            f"(set {variable} to a free port, or 0 to turn it off)"
        )


class Shutdown:
    """Set on the first SIGTERM/SIGINT; a second signal is logged and ignored."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.trigger, sig)

    def trigger(self, sig: signal.Signals | None = None) -> None:
        if self.event.is_set():
            log.info("shutdown already in progress")
            return
        if sig is not None:
            log.info("received %s: draining and shutting down", sig.name)
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds; True if shutdown was requested."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except TimeoutError:
            return False
        return True


# Bounds of the metrics/health server (security review, finding 16): a client that sends
# its request head slowly (slowloris) or without end is dropped, and at most
# HTTP_MAX_CONNECTIONS are served at once (more are closed at accept), so no client can
# hold the process's file descriptors. Probes and scrapes send a few short lines at once.
HTTP_HEAD_SECONDS = 5.0  # the whole request head, not each line
HTTP_MAX_HEADER_LINES = 100
HTTP_WRITE_SECONDS = 10.0  # a scrape that does not read its answer
HTTP_MAX_CONNECTIONS = 64


async def serve_http(
    host: str, port: int, ready: Callable[[], bool] = lambda: True
) -> asyncio.Server | None:
    """Start the metrics/health server; ``port == 0`` disables it."""
    if port == 0:
        return None
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        if served >= HTTP_MAX_CONNECTIONS:
            writer.close()
            return
        served += 1
        try:
            async with asyncio.timeout(HTTP_HEAD_SECONDS):
                path = await _request_path(reader)
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
            elif path == "/healthz":
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path == "/readyz":
                status, ctype, body = _readiness(ready)
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            async with asyncio.timeout(HTTP_WRITE_SECONDS):
                await writer.drain()
        except (TimeoutError, ConnectionError, ValueError):
            pass  # too slow, gone, or a head out of bounds: dropped without an answer
        finally:
            served -= 1
            writer.close()

    try:
        server = await asyncio.start_server(handle, host, port)
    except OSError as exc:
        raise BindError(METRICS_PORT_ENV, host, port, exc) from None
    log.info("serving /metrics /healthz /readyz on http://%s:%d", host, port)
    return server


def _readiness(ready: Callable[[], bool]) -> tuple[str, str, bytes]:
    """``/readyz``: 200 when the process says it is ready and none of its retry loops is
    failing (``pipeline.retry.RETRYING``); else 503 naming why."""
    why = "starting or stopping" if not ready() else RETRYING.why_not_ready()
    if why is None:
        return "200 OK", "text/plain", b"ready\n"
    return "503 Service Unavailable", "text/plain", f"not ready: {why}\n".encode()


async def _request_path(reader: asyncio.StreamReader) -> str:
    """The path of a request head; ValueError past HTTP_MAX_HEADER_LINES (a line over the
    reader's 64 KiB limit raises ValueError too)."""
    parts = (await reader.readline()).decode("latin-1").split()
    path = parts[1].split("?")[0] if len(parts) >= 2 else "/"
    for _ in range(HTTP_MAX_HEADER_LINES):
        if await reader.readline() in (b"\r\n", b"\n", b""):
            return path
    raise ValueError("too many header lines")
