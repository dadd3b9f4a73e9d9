"""The secured servers, brought up by the stack's own ``up --secure`` code path.

``secure_stack`` (session) calls :func:`devstack.manager.up` with
``INGEST_STACK_SECURE`` on, as ``ingest stack up --secure`` does: the shared broker
gets its TLS listeners (restarted once if it runs without them; PLAINTEXT 9092 stays
as it is) and the TLS PostgreSQL starts. Nothing here stops them: ``ingest stack
down`` does. ``secure_db`` is a fresh, migrated database on the TLS PostgreSQL.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from devstack import manager, secure
from devstack.settings import StackSettings

from pipeline import db
from pipeline.settings import KafkaSettings
from tests.support import ROOT
from tests.support.stack import Stack


@dataclass(frozen=True)
class SecureStack:
    cfg: StackSettings
    plain: Stack  # the shared stack (PLAINTEXT Kafka, Temporal, the embedded PostgreSQL)
    up_seconds: float  # what `up --secure` took in this session (a restart included)

    def kafka_env(self, listener: str) -> dict[str, str]:
        """``KAFKA_*`` of a client of ``listener`` (SCRAM, MTLS, OAUTH)."""
        return secure.kafka_env(self.cfg, listener)

    def kafka(self, listener: str) -> KafkaSettings:
        """The pipeline's own Kafka settings from those variables."""
        env = self.kafka_env(listener)
        fields = {k.removeprefix("KAFKA_").lower(): v for k, v in env.items()}
        return KafkaSettings.model_validate(fields)

    def admin_db_url(self) -> str:
        return secure.database_url(self.cfg, user="postgres", database="postgres")

    def db_url(self, database: str) -> str:
        return secure.database_url(self.cfg, database=database)


@pytest.fixture(scope="session")
def secure_stack(stack: Stack) -> SecureStack:
    cfg = StackSettings(dir=ROOT / ".stack", secure=True)
    t0 = time.monotonic()
    assert manager.up(cfg) == 0, "ingest stack up --secure failed; see .stack/logs/"
    return SecureStack(cfg=cfg, plain=stack, up_seconds=time.monotonic() - t0)


@pytest.fixture
async def secure_db(secure_stack: SecureStack) -> AsyncIterator[str]:
    """A fresh database on the TLS PostgreSQL, owned by the stack's role and migrated;
    its ``sslmode=verify-full`` DSN."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(secure_stack.admin_db_url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}" OWNER "{secure.PG_USER}"')
    finally:
        await admin.close()
    url = secure_stack.db_url(name)
    conn = await asyncpg.connect(url)
    try:
        await db.migrate(conn)
    finally:
        await conn.close()
    yield url
    admin = await asyncpg.connect(secure_stack.admin_db_url())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
