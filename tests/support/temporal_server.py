"""A private real Temporal server (``devstack.temporal_server``) for one test.

It runs on free ports, with databases of its own (``t_<hex>`` and
``t_<hex>_visibility``) on the stack's PostgreSQL or on a private one, so a test may
kill its processes or stop its PostgreSQL without touching the shared stack. The
binaries are the stack's cached build (built on first use).

``secure=True`` starts it secured as ``ingest stack up --secure`` does
(:mod:`devstack.temporal_secure`: TLS, client certificates, the JWT authorizer), with
a CA, certificates and signing key of its own under ``home``; :func:`secured_settings`
gives the pipeline's :class:`~pipeline.settings.TemporalSettings` for it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
from devstack import temporal_secure
from devstack.settings import StackSettings
from devstack.temporal_server import TemporalServer, databases, port_offsets

from pipeline.settings import TemporalSettings
from tests.support.net import free_port, free_port_base


def private_server(
    home: Path,
    *,
    shape: str = "split",
    pg_port: int | None = None,
    shards: int = 4,
    ui: bool = False,
    secure: bool = False,
) -> TemporalServer:
    """Not started yet: call ``ensure()`` (in a thread) and register :func:`discard`."""
    kw: dict[str, object] = {
        "dir": home,
        "temporal": "server",
        "temporal_shape": shape,
        "temporal_shards": shards,
        "temporal_database": f"t_{uuid.uuid4().hex[:10]}",
        "temporal_ui": ui,
        "secure": secure,
    }
    if ui:
        kw["temporal_ui_port"] = free_port()
    if pg_port is not None:
        kw["pg_port"] = pg_port
    probe = StackSettings(**kw)  # type: ignore[arg-type]
    # Below 32,000: the server keeps membership ports in a PostgreSQL smallint.
    kw["temporal_port"] = free_port_base(port_offsets(probe), lo=20000, hi=32000)
    return TemporalServer(StackSettings(**kw))  # type: ignore[arg-type]


def secured_settings(
    server: TemporalServer, permissions: Sequence[str] | None = ("default:write",), **kw: Any
) -> TemporalSettings:
    """The pipeline's settings for a secured private server: its CA, the stack's client
    certificate and a token with ``permissions`` (None: no token); ``kw`` overrides."""
    cfg = server.cfg
    cert = temporal_secure.client_cert(cfg)
    fields: dict[str, Any] = {
        "address": server.address,
        "namespace": "default",
        "tls_server_ca_cert_path": cert.ca,
        "tls_client_cert_path": cert.cert,
        "tls_client_key_path": cert.key,
        "api_key": None if permissions is None else temporal_secure.token(cfg, permissions),
    }
    return TemporalSettings(**{**fields, **kw})


async def discard(server: TemporalServer, pg_url: str) -> None:
    """Stop every process of ``server`` and drop its databases."""
    await asyncio.to_thread(server.stop)
    conn = await asyncpg.connect(pg_url)
    try:
        for db in databases(server.cfg):
            await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    finally:
        await conn.close()
