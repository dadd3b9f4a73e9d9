"""``ingest flow list [--activity A] [--json]``: per activity and key, the flow state
(:mod:`router.flow.listing`), then the latest skips (:mod:`router.flow.skips`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import uuid

import orjson

from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable, db_pool

_FLAGS = ("database_url",)


async def _list(cfg: settings.Settings, activity: str | None, skips: int, as_json: bool) -> int:
    from router.flow.listing import flow_rows, format_rows, format_skips
    from router.flow.skips import recent_skips

    pool = await db_pool(cfg.database)
    try:
        rows = await flow_rows(pool, activity)
        recent = await recent_skips(pool, activity, skips)
    finally:
        await pool.close()
    if as_json:
        doc = {"keys": rows, "skips": [dataclasses.asdict(s) for s in recent]}
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return 0
    if not rows and not recent:
        print("no flow state yet" + (f" for activity {activity}" if activity else ""))
        return 0
    print(format_rows(rows))
    if recent:
        print(f"\nlatest {len(recent)} skips:")
        print(format_skips(recent))
    return 0


def _activity(v: str) -> str:
    try:
        return str(uuid.UUID(v))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--activity {v!r}: an activity id (a uuid)") from None


def _run(args: argparse.Namespace) -> int:
    cfg = settings.load_settings(**overrides(args, *_FLAGS))
    try:
        return asyncio.run(_list(cfg, args.activity, args.skips, args.json))
    except Unreachable as exc:
        print(f"ingest flow list: {exc}", file=sys.stderr)
        return 1


def _list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--activity", type=_activity, help="only this activity (its id)")
    p.add_argument("--skips", type=int, default=20, help="how many latest skips (default 20)")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_flags(p, *_FLAGS)


COMMAND = Command(
    "flow",
    help="flow control: per activity and key, slots, waiting runs, throttle, skips",
    description="The state of each activity's `flow` block (docs/flow-control.md). "
    "Exit 1 when PostgreSQL is unreachable.",
    actions=(
        Command(
            "list",
            help="per activity and key: slots in use, waiting, next throttle slot, skips",
            run=_run,
            flags=_list_flags,
        ),
    ),
)
