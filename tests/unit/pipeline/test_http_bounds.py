"""The metrics/health server's bounds (``pipeline.runtime.serve_http``; security review,
finding 16): a request head sent slowly or without end is dropped without an answer, and
connections over the cap are closed at accept, so a client cannot hold the process's
file descriptors. A prompt probe is answered throughout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from pipeline import runtime
from tests.support.net import free_port


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(runtime, "HTTP_HEAD_SECONDS", 0.5)
    monkeypatch.setattr(runtime, "HTTP_MAX_CONNECTIONS", 4)
    port = free_port()
    srv = await runtime.serve_http("127.0.0.1", port)
    assert srv is not None
    yield port
    srv.close()
    await srv.wait_closed()


async def _get(port: int, path: str = "/healthz") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


async def test_a_prompt_probe_is_answered(server: int) -> None:
    assert (await _get(server)).startswith(b"HTTP/1.1 200 OK")
    assert b"404 Not Found" in await _get(server, "/nope")


async def test_a_slow_head_is_dropped_at_the_deadline(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    writer.write(b"GET /healthz HTTP/1.1\r\n")
    t0 = time.monotonic()
    closed = b""
    try:
        for _ in range(20):  # one header line every 0.2 s: each in time, the head never
            writer.write(b"X-Slow: 1\r\n")
            await writer.drain()
            await asyncio.sleep(0.2)
            if reader.at_eof():
                break
        closed = await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        pass
    assert time.monotonic() - t0 < 2.5  # 0.5 s deadline for the whole head, not per line
    assert closed == b""  # no answer
    writer.close()


async def test_an_endless_head_is_dropped(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    head = b"GET /healthz HTTP/1.1\r\n" + b"X-Many: 1\r\n" * (runtime.HTTP_MAX_HEADER_LINES + 5)
    writer.write(head + b"\r\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_connections_over_the_cap_are_closed_then_served_again(server: int) -> None:
    idle = [await asyncio.open_connection("127.0.0.1", server) for _ in range(4)]
    await asyncio.sleep(0.05)
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
    try:
        over = await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        over = b""
    assert over == b""  # the fifth is closed at accept
    writer.close()
    await asyncio.sleep(0.7)  # the idle four pass their head deadline and are dropped
    assert (await _get(server)).startswith(b"HTTP/1.1 200 OK")
    for _, w in idle:
        w.close()


async def test_readyz_names_the_failing_loop_and_recovers(server: int) -> None:
    from pipeline.retry import RETRYING

    assert (await _get(server, "/readyz")).startswith(b"HTTP/1.1 200 OK")
    with RETRYING.loop("ledger lookup") as failed:
        failed(TimeoutError("no answer"))
        answer = await _get(server, "/readyz")
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")
        assert b"not ready: ledger lookup retrying for" in answer
        assert b"TimeoutError: no answer" in answer
        assert (await _get(server)).startswith(b"HTTP/1.1 200 OK")  # /healthz: alive
    assert (await _get(server, "/readyz")).startswith(b"HTTP/1.1 200 OK")


async def test_readyz_is_503_before_the_process_says_it_is_ready() -> None:
    port = free_port()
    srv = await runtime.serve_http("127.0.0.1", port, ready=lambda: False)
    assert srv is not None
    try:
        answer = await _get(port, "/readyz")
        assert answer.startswith(b"HTTP/1.1 503") and b"starting or stopping" in answer
    finally:
        srv.close()
        await srv.wait_closed()
