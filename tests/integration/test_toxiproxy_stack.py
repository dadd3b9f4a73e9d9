"""Toxiproxy (``stack/devstack/toxiproxy.py``), for real: a proxy in front of the stack's
PostgreSQL carries asyncpg's queries, and its toxics do what they say (latency delays
each round trip, ``timeout`` stalls a connection until asyncpg's own timeout fires,
``reset_peer`` resets it), while a direct connection in the same test is unaffected."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
from devstack.procs import StackError
from devstack.settings import StackSettings
from devstack.toxiproxy import Toxiproxy, ToxiproxyClient, ToxiproxyError

from tests.support import toxiproxy as support
from tests.support.stack import Stack
from tests.support.toxiproxy import proxy_to, through

toxiproxy = support.toxiproxy  # the session fixture

LATENCY_MS = 500


def _pg(stack: Stack) -> tuple[str, int, str]:
    """``(host, port, url)`` of the stack's PostgreSQL."""
    parts = urlsplit(stack.admin_db_url)
    return parts.hostname or "127.0.0.1", parts.port or 5432, stack.admin_db_url


@asynccontextmanager
async def _connect(url: str, timeout: float = 10) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url, timeout=timeout)
    try:
        yield conn
    finally:
        conn.terminate()


async def _round_trip(conn: asyncpg.Connection) -> float:
    """Seconds for one simple-protocol query (one round trip)."""
    started = time.monotonic()
    assert await conn.execute("SELECT 1") == "SELECT 1"
    return time.monotonic() - started


async def test_a_proxy_in_front_of_postgres_carries_queries(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    host, port, url = _pg(stack)
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        assert proxy.upstream == f"{host}:{port}" and proxy.enabled
        assert proxy.port != port and proxy.listen.startswith("127.0.0.1:")
        assert toxiproxy.proxies()[proxy.name] == proxy
        async with _connect(through(url, proxy)) as conn:
            assert await conn.fetchval("SELECT 40 + $1::int", 2) == 42
            # the server sees the proxy's connection, from 127.0.0.1 like a direct one
            assert await conn.fetchval("SELECT inet_server_port()") == port
    assert proxy.name not in toxiproxy.proxies()


async def test_a_latency_toxic_delays_each_round_trip_through_the_proxy_only(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    host, port, url = _pg(stack)
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        async with _connect(url) as direct, _connect(through(url, proxy)) as proxied:
            before = await _round_trip(proxied)
            toxic = toxiproxy.add_toxic(proxy.name, "latency", {"latency": LATENCY_MS, "jitter": 0})
            assert (toxic.name, toxic.stream) == ("latency_downstream", "downstream")
            assert [t.attributes for t in toxiproxy.toxics(proxy.name)] == [
                {"latency": LATENCY_MS, "jitter": 0}
            ]
            slow = await _round_trip(proxied)  # the open connection gets the toxic too
            fast = await _round_trip(direct)
            assert slow >= LATENCY_MS / 1000, (slow, fast)
            assert fast < LATENCY_MS / 1000 and before < LATENCY_MS / 1000, (before, fast)

            toxiproxy.remove_toxic(proxy.name, toxic.name)
            assert toxiproxy.toxics(proxy.name) == []
            assert await _round_trip(proxied) < LATENCY_MS / 1000


async def test_a_timeout_toxic_stalls_until_asyncpgs_timeout_and_removing_it_heals(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    host, port, url = _pg(stack)
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        proxied_url = through(url, proxy)
        async with _connect(proxied_url) as open_before:
            # timeout 0: the data is dropped and the connection is never closed
            toxiproxy.add_toxic(proxy.name, "timeout", {"timeout": 0}, stream="upstream")
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncpg.connect(proxied_url, timeout=1.5)
            assert time.monotonic() - started >= 1.5
            with pytest.raises(TimeoutError):
                await open_before.execute("SELECT 1", timeout=1.0)
            async with _connect(url) as direct:  # PostgreSQL itself is fine
                assert await direct.fetchval("SELECT 1") == 1

            toxiproxy.remove_toxic(proxy.name, "timeout_upstream")
            async with _connect(proxied_url, timeout=5) as conn:
                assert await conn.fetchval("SELECT 1") == 1


async def test_a_reset_peer_toxic_fails_the_connection(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    host, port, url = _pg(stack)
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        proxied_url = through(url, proxy)
        toxiproxy.add_toxic(proxy.name, "reset_peer", {"timeout": 0}, stream="upstream")
        with pytest.raises(ConnectionResetError):
            await asyncpg.connect(proxied_url, timeout=5)

        toxiproxy.reset()  # every toxic of every proxy of this (private) Toxiproxy
        assert toxiproxy.toxics(proxy.name) == []
        async with _connect(proxied_url) as conn:
            assert await conn.fetchval("SELECT 1") == 1


async def test_a_disabled_proxy_refuses_connections_until_enabled(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    host, port, url = _pg(stack)
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        assert not toxiproxy.set_enabled(proxy.name, False).enabled
        with pytest.raises(ConnectionRefusedError):
            await asyncpg.connect(through(url, proxy), timeout=5)
        again = toxiproxy.set_enabled(proxy.name, True)
        assert again.enabled and again.listen == proxy.listen
        async with _connect(through(url, proxy)) as conn:
            assert await conn.fetchval("SELECT 1") == 1


def test_the_api_refuses_what_it_cannot_do(toxiproxy: ToxiproxyClient) -> None:
    with pytest.raises(ToxiproxyError, match="404 proxy not found"):
        toxiproxy.add_toxic("no_such_proxy", "latency", {"latency": 1})
    with proxy_to(toxiproxy, "127.0.0.1:9", "dup") as proxy:
        with pytest.raises(ToxiproxyError, match="409 proxy already exists"):
            toxiproxy.create_proxy(proxy.name, "127.0.0.1:9")
        with pytest.raises(ToxiproxyError, match="400"):
            toxiproxy.add_toxic(proxy.name, "no_such_toxic")  # type: ignore[arg-type]


def test_the_service_says_already_running_and_refuses_a_taken_port(
    toxiproxy: ToxiproxyClient, tmp_path: Path
) -> None:
    port = int(toxiproxy.url.rpartition(":")[2])
    assert toxiproxy.version() == f"v{StackSettings(dir=tmp_path).toxiproxy_version}"
    same = Toxiproxy(StackSettings(dir=tmp_path, toxiproxy_port=port))
    assert same.answering() and same.ensure() == "already running"

    with socket.socket() as other:  # a port something that is not Toxiproxy listens on
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        with pytest.raises(StackError, match=f"port {taken} .*INGEST_STACK_TOXIPROXY_PORT"):
            Toxiproxy(StackSettings(dir=tmp_path, toxiproxy_port=taken)).ensure()


async def test_a_pipeline_pool_query_on_a_half_open_link_ends_and_the_pool_recovers(
    stack: Stack, toxiproxy: ToxiproxyClient
) -> None:
    """``pipeline.db.create_pool``'s ``command_timeout`` (``DATABASE_COMMAND_TIMEOUT``):
    a query sent into a link that answers nothing ends in ``TimeoutError`` after about
    twice the bound (the bound, then asyncpg's cancel request, which meets the same dead
    link), a new connection gives up after the connect timeout, and once the link works
    again the same pool answers. Without the bound the query waits until the link is
    closed (tests/faults/test_net_faults.py measured it)."""
    from pipeline import db as pipeline_db

    host, port, url = _pg(stack)
    bound = 2.0
    with proxy_to(toxiproxy, f"{host}:{port}", "pg") as proxy:
        pool = await pipeline_db.create_pool(through(url, proxy), 1, 2, command_timeout=bound)
        try:
            assert await pool.fetchval("SELECT 1") == 1
            with support.toxic(toxiproxy, proxy, "timeout", {"timeout": 0}, stream="upstream"):
                started = time.monotonic()
                with pytest.raises(TimeoutError):
                    await pool.fetchval("SELECT 2")
                took = time.monotonic() - started
                assert bound <= took < 3 * bound + 2, took
            # The toxic is gone: the pool's next query gets a working connection.
            assert await pool.fetchval("SELECT 3") == 3
        finally:
            await pool.close()
