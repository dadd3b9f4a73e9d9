"""PostgreSQL: connection pools and the versioned migration runner.

Migrations are the ``schemas/migrations/NNNN_name.sql`` files, applied in order,
each in its own transaction, recorded in ``schema_migrations``. A session-level
advisory lock serialises concurrent ``ingest migrate`` runs (several replicas
starting at once). A small runner rather than a migration framework: the
Python tools (alembic, yoyo) want a sync driver and an ORM or DSN juggling,
while plain SQL files plus ~40 lines here keep one driver (asyncpg).
"""

from __future__ import annotations

import logging
from importlib import resources
from urllib.parse import urlsplit

import asyncpg

from pipeline.settings import ConfigError

log = logging.getLogger(__name__)

_LOCK_KEY = 0x1A6E57  # arbitrary, fixed: the advisory lock id for migrations


def redact(url: str) -> str:
    """A DSN safe to log: the password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def migrations() -> list[tuple[str, str]]:
    """(version, sql) pairs in order."""
    folder = resources.files("schemas") / "migrations"
    files = sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name.removesuffix(".sql"), p.read_text()) for p in files]


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; returns the versions applied (empty when up to date)."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, sql in migrations():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
            log.info("applied migration %s", version)
            applied.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied


class SchemaBehind(ConfigError):
    """The database lacks migrations this build needs: fatal at start-up (exit 2, one
    line with the fix, as every ConfigError), instead of a query failing later on a
    missing table (``UndefinedTableError``)."""

    def __init__(self, url: str, pending: list[str]) -> None:
        self.pending = pending
        some = ", ".join(pending[:3]) + (
            f" and {len(pending) - 3} more" if len(pending) > 3 else ""
        )
        super().__init__(
            f"the database at DATABASE_URL={redact(url)} lacks {len(pending)} migration(s)"
            f" this build needs ({some}): run `ingest migrate` first (`make run` does)"
        )


async def pending(conn: asyncpg.Connection | asyncpg.Pool) -> list[str]:
    """The migrations of this build not applied to the database (all of them on an empty
    one). Versions applied that this build does not know (a newer build migrated) are
    fine: migrations only add."""
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations")
    except asyncpg.UndefinedTableError:
        rows = []
    done = {r["version"] for r in rows}
    return [version for version, _ in migrations() if version not in done]


async def connect(url: str, timeout: float = 10) -> asyncpg.Connection:
    return await asyncpg.connect(url, timeout=timeout)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release a pooled connection without asyncpg's reset statement (advisory unlock,
    ``CLOSE ALL``, ``UNLISTEN *``, ``RESET ALL``): the pipeline leaves no session state
    on pooled connections (``migrate`` locks on a connection of its own), so that was
    one round trip per statement for nothing. asyncpg still rolls back an open
    transaction and drops listeners on release."""


async def create_pool(url: str, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, timeout=10, reset=_keep_session
    )
    assert pool is not None
    return pool


async def prune_older_than(
    conn: asyncpg.Pool | asyncpg.Connection, delete_sql: str, retention_days: float, *args: object
) -> int:
    """Run ``delete_sql``, a DELETE whose ``$1`` is the retention in seconds (``args``
    follow as ``$2``...), unless ``retention_days`` is 0 (keep forever); the rows deleted.

    The one retention rule of the ledger, the flow decisions and windows, and the outbox.
    """
    if retention_days <= 0:
        return 0
    status = await conn.execute(delete_sql, retention_days * 86400, *args)
    return int(status.split()[-1])
