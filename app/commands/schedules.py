"""``ingest schedules sync|pause|resume``: the Temporal Schedules of cron activities.

``ingest activities apply`` (in :mod:`app.commands.activities`) reconciles the schedules
too, through :func:`sync_and_print`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.client_flags import add_connection_flags, run_with_pool, run_with_settings
from app.command import Command
from pipeline import settings
from pipeline.clients import db_pool, temporal_client


async def sync_and_print(cfg: settings.Settings, pool: Any) -> int:
    """Reconcile every cron activity's schedule; prints each change (or 'no changes')."""
    from scheduler.sync import reconcile

    client = await temporal_client(cfg.temporal)
    changes = await reconcile(client, pool, cfg.temporal.task_queue)
    for change in changes:
        print(change)
    if not changes:
        print("schedules: no changes")
    return 0


def _schedules_sync(args: argparse.Namespace) -> int:
    return run_with_pool(args, sync_and_print, "schedules sync")


def _pause_or_resume(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from scheduler import sync
    from schemas.ids import schedule_id

    async def work(cfg: settings.Settings) -> int:
        client = await temporal_client(cfg.temporal)
        try:
            if args.schedules_command == "pause":
                await sync.pause(client, args.activity)
                print(f"paused {schedule_id(args.activity)}")
                return 0
            pool = await db_pool(cfg.database)
            try:
                said = await sync.resume(
                    client,
                    pool,
                    args.activity,
                    now=getattr(args, "now", False),
                    task_queue=cfg.temporal.task_queue,
                )
                print(f"{schedule_id(args.activity)}: {said}")
            finally:
                await pool.close()
            return 0
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                print(
                    f"no schedule {schedule_id(args.activity)}: run `ingest schedules sync`",
                    file=sys.stderr,
                )
                return 1
            raise

    return run_with_settings(args, work, f"schedules {args.schedules_command}")


def _pause_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("activity", help="activity id")
    add_connection_flags(p)


def _resume_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("activity", help="activity id")
    p.add_argument(
        "--now",
        action="store_true",
        help="apply the misfire policy now, not at the next regular fire (an hourly "
        "cron need not wait an hour to catch up); needs a running worker",
    )
    add_connection_flags(p)


COMMAND = Command(
    "schedules",
    help="Temporal Schedules of cron activities",
    actions=(
        Command(
            "sync",
            help="create/update/pause/delete schedules to match the cron activities",
            description="Idempotent: prints each change, or 'no changes'.",
            run=_schedules_sync,
            flags=add_connection_flags,
        ),
        Command(
            "pause",
            help="pause an activity's schedule (stays paused through syncs)",
            run=_pause_or_resume,
            flags=_pause_flags,
        ),
        Command(
            "resume",
            help="unpause it; the misfire policy handles missed times at the next fire",
            run=_pause_or_resume,
            flags=_resume_flags,
        ),
    ),
)
