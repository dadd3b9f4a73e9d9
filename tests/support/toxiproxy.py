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
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from devstack.settings import StackSettings
from devstack.toxiproxy import Proxy, Toxiproxy, ToxiproxyClient

from tests.support.net import free_port


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
