"""Toxiproxy for tests: the session fixture ``toxiproxy`` and a proxy per test.

``toxiproxy`` starts a private Toxiproxy (``devstack.toxiproxy``, the stack's cached
build, built on first use) with its API on a free port and its pid file and log under a
session folder, and stops it at the end of the session: private, so that a test's
``reset()`` or a toxic it forgets cannot reach another pytest run's proxies. A test
module binds it at module level (an import of the name would be shadowed by each test's
parameter, which ruff reports as F811)::

    from tests.support import toxiproxy as support
    toxiproxy = support.toxiproxy

:func:`proxy_to` puts a proxy of its own, on a free port, in front of one address for
the length of a ``with`` block.

``proxied`` (per test) puts three proxies of the session's Toxiproxy in front of the
stack's servers, for the pipeline's processes to use instead of the servers themselves
(:class:`Proxied`): Kafka through the broker's ``PROXIED`` listener (the stack's
``INGEST_STACK_KAFKA_PROXIED_PORT``: its proxy listens on that advertised port, so the
clients keep going through it after bootstrap), the Temporal frontend and PostgreSQL;
and a fourth, Kafka again through the broker's ``PROXIED_B`` listener, for one process
to be cut from Kafka alone. A broker of this stack running without those listeners is
restarted with them (the stack's own :meth:`devstack.kafka.Kafka.ensure`); one this
stack did not start is reported.
:func:`toxic` holds a toxic on a proxy for the length of a ``with`` block.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from devstack import toxiproxy as devstack_toxiproxy
from devstack.kafka import Kafka
from devstack.procs import StackError
from devstack.settings import StackSettings
from devstack.toxiproxy import Proxy, Stream, Toxic, ToxicType, Toxiproxy, ToxiproxyClient

from tests.support import ROOT
from tests.support.net import free_port
from tests.support.stack import Stack


def private_toxiproxy(home: Path) -> Toxiproxy:
    """Not started yet: ``ensure()`` starts it, ``stop()`` stops it."""
    return Toxiproxy(StackSettings(dir=home, toxiproxy_port=free_port()))


@contextmanager
def proxy_to(client: ToxiproxyClient, upstream: str, prefix: str = "t") -> Iterator[Proxy]:
    """A proxy named ``<prefix>_<hex>`` from a free 127.0.0.1 port to ``upstream``,
    deleted (with its toxics) at the end of the block."""
    proxy = client.create_proxy(f"{prefix}_{uuid.uuid4().hex[:8]}", upstream)
    try:
        yield proxy
    finally:
        client.delete_proxy(proxy.name)


def through(url: str, proxy: Proxy) -> str:
    """``url`` (``scheme://[user@]host:port/...``) with its host and port the proxy's."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@{proxy.listen}" if user else proxy.listen
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToxiproxyClient]:
    if os.environ.get("INGEST_TEST_NO_STACK"):  # make test-unit: no service at all
        pytest.fail("this test needs Toxiproxy; make test-unit runs without one")
    server = private_toxiproxy(tmp_path_factory.mktemp("toxiproxy"))
    server.ensure()  # a StackError says why it could not
    try:
        yield server.client()
    finally:
        server.stop()


@dataclass(frozen=True)
class Proxied:
    """The proxies in front of the stack's Kafka, Temporal frontend and PostgreSQL."""

    client: ToxiproxyClient
    kafka: Proxy
    temporal: Proxy
    postgres: Proxy
    # Kafka again, through the broker's second listener (PROXIED_B): for one process
    # to be cut from Kafka while the others, on ``kafka``, are not.
    kafka_b: Proxy

    def database_url(self, url: str) -> str:
        """``url`` (a database on the stack's PostgreSQL) through the PostgreSQL proxy."""
        return through(url, self.postgres)

    def by_server(self) -> dict[str, Proxy]:
        return {"kafka": self.kafka, "temporal": self.temporal, "postgres": self.postgres}


def proxied_kafka(cfg: StackSettings) -> None:
    """Make sure the stack's broker has its PROXIED listener (restarting a broker this
    stack started); fails the test with what to do when it cannot."""
    if not cfg.kafka_proxied_port:
        pytest.fail(
            "Kafka behind a proxy needs the broker's PROXIED listener: set "
            "INGEST_STACK_KAFKA_PROXIED_PORT (e.g. 19092, the proxy's port) for the stack "
            "and the tests (docs/local-stack.md)"
        )
    kafka = Kafka(cfg)
    if kafka.missing_listeners():
        try:
            kafka.ensure()  # restarts a broker of this stack with the listener
        except StackError as exc:
            pytest.fail(f"the stack's Kafka has no PROXIED listener: {exc}")


@contextmanager
def proxied_stack(client: ToxiproxyClient, stack: Stack, cfg: StackSettings) -> Iterator[Proxied]:
    """The three proxies for the length of a ``with`` block (deleted at its end)."""
    proxied_kafka(cfg)
    pg = urlsplit(stack.admin_db_url)
    tag = uuid.uuid4().hex[:8]
    made: list[Proxy] = []
    try:
        for name, upstream, listen in (
            ("kafka", devstack_toxiproxy.kafka_upstream(cfg), devstack_toxiproxy.kafka_listen(cfg)),
            ("temporal", stack.temporal, None),
            ("postgres", f"{pg.hostname}:{pg.port}", None),
            (
                "kafka_b",
                devstack_toxiproxy.kafka_upstream(cfg, 1),
                devstack_toxiproxy.kafka_listen(cfg, 1),
            ),
        ):
            args = {"listen": listen} if listen else {}
            made.append(client.create_proxy(f"{name}_{tag}", upstream, **args))
        yield Proxied(client, *made)
    finally:
        for proxy in made:
            client.delete_proxy(proxy.name)


@pytest.fixture
def proxied(toxiproxy: ToxiproxyClient, stack: Stack) -> Iterator[Proxied]:
    with proxied_stack(toxiproxy, stack, StackSettings(dir=ROOT / ".stack")) as found:
        yield found


@contextmanager
def toxic(
    client: ToxiproxyClient,
    proxy: Proxy,
    type: ToxicType,
    attributes: dict[str, Any] | None = None,
    *,
    stream: Stream = "downstream",
) -> Iterator[Toxic]:
    """``type`` on ``proxy``'s ``stream`` for the length of the block (removed after it,
    also when the block fails)."""
    made = client.add_toxic(proxy.name, type, attributes, stream=stream)
    try:
        yield made
    finally:
        client.remove_toxic(proxy.name, made.name)
