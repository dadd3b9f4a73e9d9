"""``ingest flow list [--activity A] [--json]``: per activity and key, the flow state
(:mod:`router.flow.listing`), then the latest skips (:mod:`router.flow.skips`), then
what ends each activity's runs early: its cancel_on rules, timeouts, singleton cancel
(:mod:`router.flow.lifecycle_view`).

``ingest flow release ACTIVITY (--key VALUE | --workflow-id ID)``: close the head of a
flow.ordered line (a failed or stuck run) so the runs behind it go on
(:func:`router.flow.order.release`), and wake the next one."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import uuid

import orjson

from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable, db_pool

_FLAGS = ("database_url",)


async def _list(cfg: settings.Settings, activity: str | None, skips: int, as_json: bool) -> int:
    from router.flow.lifecycle_view import declared, format_declared
    from router.flow.listing import flow_rows, format_rows, format_skips
    from router.flow.skips import recent_skips

    pool = await db_pool(cfg.database)
    try:
        rows = await flow_rows(pool, activity)
        recent = await recent_skips(pool, activity, skips)
        ending = await declared(pool, activity)
    finally:
        await pool.close()
    if as_json:
        doc = {"keys": rows, "skips": [dataclasses.asdict(s) for s in recent], "ends": ending}
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return 0
    if not rows and not recent and not ending:
        print("no flow state yet" + (f" for activity {activity}" if activity else ""))
        return 0
    if rows:
        print(format_rows(rows))
    if recent:
        print(f"\nlatest {len(recent)} skips:")
        print(format_skips(recent))
    if ending:  # cancel_on, timeouts, singleton cancel: what ends runs early
        print(f"\n{len(ending)} activities end runs early:")
        print(format_declared(ending))
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


_RELEASE_FLAGS = ("temporal_address", "namespace", "database_url")


async def _release(cfg: settings.Settings, args: argparse.Namespace) -> int:
    from pipeline.clients import temporal_client
    from router.flow.order import NothingToRelease, release

    pool = await db_pool(cfg.database)
    try:
        done = await release(
            pool, args.activity_id, key=args.key, workflow_id=args.workflow_id, by=args.by
        )
    except NothingToRelease as exc:
        print(f"ingest flow release: {exc}", file=sys.stderr)
        return 1
    finally:
        await pool.close()
    print(f"released {done.workflow_id} (run {done.run_status or 'not started'}) by {args.by}")
    if done.next_workflow_id is None:
        print("nobody waits behind it")
        return 0
    client = await temporal_client(cfg.temporal)
    try:  # its timer would ask within 30 s anyway: the signal only makes it now
        await client.get_workflow_handle(done.next_workflow_id).signal("flow_wake")
        print(f"woke {done.next_workflow_id}")
    except Exception as exc:  # not started yet, or closed: it finds its turn itself
        print(f"next {done.next_workflow_id} not woken ({type(exc).__name__}); it asks on its own")
    return 0


def _run_release(args: argparse.Namespace) -> int:
    if (args.key is None) == (args.workflow_id is None):
        print("ingest flow release: give --key or --workflow-id (one of them)", file=sys.stderr)
        return 2
    cfg = settings.load_settings(**overrides(args, *_RELEASE_FLAGS))
    try:
        return asyncio.run(_release(cfg, args))
    except Unreachable as exc:
        print(f"ingest flow release: {exc}", file=sys.stderr)
        return 1


def _release_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("activity_id", type=_activity, metavar="ACTIVITY", help="the activity (its id)")
    p.add_argument("--key", help="the line's key value ('' for an activity without a key)")
    p.add_argument("--workflow-id", help="the run whose open place to close")
    p.add_argument(
        "--by", default=os.environ.get("USER") or "operator", help="who releases (recorded)"
    )
    add_flags(p, *_RELEASE_FLAGS)


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
        Command(
            "release",
            help="flow.ordered: release a line's failed or stuck head so the runs behind it go on",
            run=_run_release,
            flags=_release_flags,
        ),
    ),
)
