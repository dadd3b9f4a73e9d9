"""One secured private real Temporal server for the session (``secure_server``): TLS
on its frontend, client certificates required, the JWT authorizer and claim mapper
(``devstack.temporal_secure``), on the stack's PostgreSQL in databases of its own, with
a CA, certificates and signing key of its own.

For the event path with all three servers secured (``test_event_path_all_secured``):
``secure_stack`` is the stack's secured Kafka listeners and TLS PostgreSQL only, and
``secure_db`` (tests/integration/secure's) a fresh database on the latter. Not
``ingest stack up --secure`` as tests/integration/secure calls it: under
``make test-server`` the stack's own real server runs without ``--secure``, and ``up
--secure`` would refuse it; the stack's Temporal is left as it is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from devstack.kafka import Kafka
from devstack.postgres_tls import PostgresTls
from devstack.settings import StackSettings
from devstack.temporal_server import TemporalServer

from tests.integration.secure.conftest import SecureStack
from tests.integration.secure.conftest import secure_db as secure_db  # a fixture
from tests.support import ROOT
from tests.support.stack import Stack
from tests.support.temporal_server import discard, private_server


@pytest.fixture(scope="session")
def secure_server(stack, tmp_path_factory) -> Iterator[TemporalServer]:
    server = private_server(tmp_path_factory.mktemp("secure-temporal"), shape="single", secure=True)
    began = time.monotonic()
    try:
        server.ensure()  # no event loop runs here: ensure() runs its own
        print(f"\nsecured Temporal server {server.address} up in {time.monotonic() - began:.1f} s")
        yield server
    finally:
        asyncio.run(discard(server, stack.admin_db_url))


@pytest.fixture(scope="session")
def secure_stack(stack: Stack) -> SecureStack:
    """The shared broker's secured listeners (it is restarted once with them if this
    stack started it without; ``make test`` starts it with them) and the TLS PostgreSQL."""
    cfg = StackSettings(dir=ROOT / ".stack", secure=True)
    began = time.monotonic()
    for service in (Kafka(cfg), PostgresTls(cfg)):
        service.ensure()
    return SecureStack(cfg=cfg, plain=stack, up_seconds=time.monotonic() - began)
