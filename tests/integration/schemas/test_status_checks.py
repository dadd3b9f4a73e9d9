"""The database's status CHECK constraints allow exactly the members of schemas.status."""

from __future__ import annotations

import re
import uuid
from enum import StrEnum

import asyncpg
import pytest

from schemas.status import RunStatus, TaskStatus


async def _allowed(pool: asyncpg.Pool, table: str) -> set[str]:
    """The string literals of ``table``'s CHECK on ``status``, as PostgreSQL stores it."""
    defs = await pool.fetch(
        "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint"
        " WHERE conrelid = $1::regclass AND contype = 'c'",
        table,
    )
    found = [r["d"] for r in defs if re.search(r"\bstatus\b", r["d"])]
    assert len(found) == 1, defs
    return set(re.findall(r"'([^']*)'::text", found[0]))


@pytest.mark.parametrize(
    ("table", "enum"), [("activity_runs", RunStatus), ("task_instances", TaskStatus)]
)
async def test_check_matches_enum(db_pool: asyncpg.Pool, table: str, enum: type[StrEnum]) -> None:
    assert await _allowed(db_pool, table) == {s.value for s in enum}


async def test_check_refuses_other_status(db_pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await db_pool.execute(
            "INSERT INTO task_instances (id, run_id, task_type, index, status)"
            " VALUES ('t', $1, 'noop', 0, 'done')",
            uuid.uuid4(),
        )
