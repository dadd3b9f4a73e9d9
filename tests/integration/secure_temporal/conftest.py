"""One secured private real Temporal server for the session (``secure_server``): TLS
on its frontend, client certificates required, the JWT authorizer and claim mapper
(``devstack.temporal_secure``), on the stack's PostgreSQL in databases of its own, with
a CA, certificates and signing key of its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from devstack.temporal_server import TemporalServer

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
