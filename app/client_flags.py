"""The connection flags of the operator commands, and running one command's async work.

``ingest activities ...`` and ``ingest schedules ...`` take the same flags
(``--temporal-address``, ``--namespace``, ``--task-queue``, ``--database-url``);
an unreachable service ends the command with exit 1 and one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg

from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable, db_pool

CONNECTION = ("temporal_address", "namespace", "task_queue", "database_url")


def add_connection_flags(p: argparse.ArgumentParser) -> None:
    add_flags(p, *CONNECTION)


def settings_from(args: argparse.Namespace) -> settings.Settings:
    return settings.load_settings(**overrides(args, *CONNECTION))


def run_with_settings(
    args: argparse.Namespace,
    work: Callable[[settings.Settings], Coroutine[Any, Any, int]],
    name: str,
) -> int:
    """``work(settings)`` from the flags; exit 1 naming the service that does not answer."""
    cfg = settings_from(args)
    try:
        return asyncio.run(work(cfg))
    except Unreachable as exc:
        print(f"ingest {name}: {exc}", file=sys.stderr)
        return 1


def run_with_pool(
    args: argparse.Namespace,
    work: Callable[[settings.Settings, asyncpg.Pool], Coroutine[Any, Any, int]],
    name: str,
) -> int:
    """:func:`run_with_settings` with a database pool, closed when ``work`` returns."""

    async def with_pool(cfg: settings.Settings) -> int:
        pool = await db_pool(cfg.database)
        try:
            return await work(cfg, pool)
        finally:
            await pool.close()

    return run_with_settings(args, with_pool, name)
