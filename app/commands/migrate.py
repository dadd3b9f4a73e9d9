"""``ingest migrate``: apply the SQL migrations under schemas/migrations."""

from __future__ import annotations

import argparse
import asyncio
import sys

from app.command import Command
from pipeline import db, settings
from pipeline.clients import Unreachable


async def _migrate(url: str) -> list[str]:
    if warning := db.tls_warning(url):
        print(f"ingest migrate: warning: {warning}", file=sys.stderr)
    try:
        conn = await db.connect(url)
    except Exception as exc:
        raise Unreachable(
            f"cannot reach PostgreSQL at DATABASE_URL={db.redact(url)}: {type(exc).__name__}: {exc}"
        ) from None
    try:
        return await db.migrate(conn)
    finally:
        await conn.close()


def _run(args: argparse.Namespace) -> int:
    db.refuse_password_on_command_line(args.database_url)
    cfg = settings.load_settings(database__url=args.database_url)
    try:
        applied = asyncio.run(_migrate(cfg.database.url.get_secret_value()))
    except Unreachable as exc:
        print(f"ingest migrate: {exc}")
        return 1
    print(f"applied: {', '.join(applied)}" if applied else "database is up to date")
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        help="PostgreSQL DSN without a password (env DATABASE_URL; password: .pgpass or"
        " PGPASSWORD)",
    )


COMMAND = Command(
    "migrate",
    help="apply database migrations (idempotent)",
    description="Apply pending SQL migrations from schemas/migrations, in order, once each.",
    run=_run,
    flags=_flags,
)
