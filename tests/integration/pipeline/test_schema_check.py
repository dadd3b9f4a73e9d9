"""A process on a database that lacks migrations stops at start-up with one line that
says what to run, instead of failing later on a missing table (real PostgreSQL)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import asyncpg
import pytest

from pipeline import db, settings
from pipeline.clients import db_pool
from tests.support import ROOT
from tests.support.process import clean_env

pytestmark = pytest.mark.integration


def _flow_list(database_url: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "flow", "list"],
        env=clean_env(PYTHONPATH=str(ROOT), DATABASE_URL=database_url),
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )


async def test_a_database_never_migrated_is_refused(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DROP TABLE schema_migrations")  # as a fresh database has none
    finally:
        await conn.close()
    cfg = settings.DatabaseSettings(DATABASE_URL=database_url)
    with pytest.raises(db.SchemaBehind) as caught:
        await db_pool(cfg)
    assert caught.value.pending == [v for v, _ in db.migrations()]
    assert "run `ingest migrate`" in str(caught.value)


async def test_a_command_on_a_database_one_migration_behind_exits_2_naming_it(
    database_url: str, db_pool: asyncpg.Pool
) -> None:
    last = db.migrations()[-1][0]
    await db_pool.execute("DELETE FROM schema_migrations WHERE version = $1", last)
    res = await asyncio.to_thread(_flow_list, database_url)
    err = res.stderr.decode()
    assert res.returncode == 2, (res.returncode, err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "configuration error" in lines[0], err
    assert f"lacks 1 migration(s) this build needs ({last})" in lines[0], err
    assert "ingest migrate" in lines[0]
    # With the migration recorded again (its tables never left), the same command runs.
    await db_pool.execute("INSERT INTO schema_migrations (version) VALUES ($1)", last)
    again = await asyncio.to_thread(_flow_list, database_url)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
