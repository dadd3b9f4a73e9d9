"""``ingest activities apply|list`` and ``ingest schedules sync|pause|resume``.

``apply`` validates the whole file before writing anything (exit 2 naming each
bad field), upserts every activity in one transaction, then reconciles the
schedules (``--no-sync`` to skip). ``dedupe_key_strategy`` is stored and
listed, never read at run time (shared/seeds/000).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson

from pipeline import settings
from pipeline.clients import Unreachable, db_pool, temporal_client


def _settings(args: argparse.Namespace) -> settings.Settings:
    return settings.load(
        temporal__address=args.temporal_address,
        temporal__namespace=args.namespace,
        temporal__task_queue=args.task_queue,
        database__url=args.database_url,
    )


def _run(
    args: argparse.Namespace,
    work: Callable[[settings.Settings], Coroutine[Any, Any, int]],
    name: str,
) -> int:
    cfg = _settings(args)
    try:
        return asyncio.run(work(cfg))
    except Unreachable as exc:
        print(f"ingest {name}: {exc}", file=sys.stderr)
        return 1


async def _sync(cfg: settings.Settings, pool: Any) -> int:
    from scheduler.sync import reconcile

    client = await temporal_client(cfg.temporal)
    changes = await reconcile(client, pool, cfg.temporal.task_queue)
    for change in changes:
        print(change)
    if not changes:
        print("schedules: no changes")
    return 0


async def _apply_permits(pool: Any, parsed: Any, file: str) -> int:
    """Permit resources (workers.permits.apply): check references, then upsert."""
    from workers.permits.apply import UnknownResources, apply_resources, check_references

    try:
        await check_references(pool, parsed)
    except UnknownResources as exc:
        for problem in exc.problems:
            print(f"{file}: {problem}", file=sys.stderr)
        return 2
    for line in await apply_resources(pool, parsed):
        print(line)
    return 0


def _apply(args: argparse.Namespace) -> int:
    from scheduler import files, store

    try:
        parsed = files.load(Path(args.file))
    except files.FileError as exc:
        for problem in exc.problems:
            print(f"{args.file}: {problem}", file=sys.stderr)
        return 2

    async def work(cfg: settings.Settings) -> int:
        pool = await db_pool(cfg.database)
        try:
            if (code := await _apply_permits(pool, parsed, args.file)) != 0:
                return code
            results = await store.upsert(pool, list(parsed.activities))
            for act, result in zip(parsed.activities, results, strict=True):
                print(f"{result:<8} activity {act.id} ({act.name})")
            if args.no_sync:
                return 0
            try:
                return await _sync(cfg, pool)
            except Unreachable as exc:
                print(
                    f"activities saved, schedules NOT synced: {exc}; run `ingest schedules sync`",
                    file=sys.stderr,
                )
                return 1
        finally:
            await pool.close()

    return _run(args, work, "activities apply")


def _list(args: argparse.Namespace) -> int:
    from scheduler import store

    async def work(cfg: settings.Settings) -> int:
        pool = await db_pool(cfg.database)
        try:
            rows = [store.to_json(r) for r in await store.all_rows(pool)]
        finally:
            await pool.close()
        if args.json:
            print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
            return 0
        print(f"{'ID':<36}  {'NAME':<24}  {'ENABLED':<7}  {'TRIGGER':<40}  DEDUPE_KEY_STRATEGY")
        for r in rows:
            t = r["trigger"]
            trig = (
                f"event {t['event_type']}"
                if t["type"] == "event"
                else f"cron {t['cron']} {t.get('timezone', 'UTC')} {t.get('misfire_policy')}"
            )
            print(
                f"{r['id']:<36}  {r['name'][:24]:<24}  {r['enabled']!s:<7}  {trig[:40]:<40}  "
                f"{r['dedupe_key_strategy'] or '-'}"
            )
        return 0

    return _run(args, work, "activities list")


def _schedules_sync(args: argparse.Namespace) -> int:
    async def work(cfg: settings.Settings) -> int:
        pool = await db_pool(cfg.database)
        try:
            return await _sync(cfg, pool)
        finally:
            await pool.close()

    return _run(args, work, "schedules sync")


def _pause_or_resume(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from scheduler import sync
    from scheduler.spec import schedule_id

    async def work(cfg: settings.Settings) -> int:
        client = await temporal_client(cfg.temporal)
        try:
            if args.schedules_command == "pause":
                await sync.pause(client, args.activity)
                print(f"paused {schedule_id(args.activity)}")
                return 0
            pool = await db_pool(cfg.database)
            try:
                said = await sync.resume(client, pool, args.activity)
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

    return _run(args, work, f"schedules {args.schedules_command}")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temporal-address", help="host:port (env TEMPORAL_ADDRESS)")
    p.add_argument("--namespace", help="Temporal namespace (env TEMPORAL_NAMESPACE)")
    p.add_argument("--task-queue", help="workers' task queue (env TEMPORAL_TASK_QUEUE)")
    p.add_argument("--database-url", help="PostgreSQL DSN (env DATABASE_URL)")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    acts = sub.add_parser("activities", help="apply or list activity definitions")
    asub = acts.add_subparsers(dest="activities_command", metavar="ACTION", required=True)
    p = asub.add_parser(
        "apply",
        help="validate a JSON/YAML file of activities, upsert them, sync schedules",
        description="Validate FILE ({'activities': [...]}) completely, then upsert every "
        "activity and reconcile the Temporal Schedules of cron activities. Exit 2 "
        "naming each bad field (e.g. activities[1].trigger.misfire_policy) without "
        "writing anything.",
    )
    p.add_argument("file", help="path to a .json, .yaml or .yml file")
    p.add_argument("--no-sync", action="store_true", help="do not touch Temporal Schedules")
    _common(p)
    p.set_defaults(func=_apply)
    p = asub.add_parser("list", help="list activities (table, or --json)")
    p.add_argument("--json", action="store_true", help="JSON, every stored field")
    _common(p)
    p.set_defaults(func=_list)

    sched = sub.add_parser("schedules", help="Temporal Schedules of cron activities")
    ssub = sched.add_subparsers(dest="schedules_command", metavar="ACTION", required=True)
    p = ssub.add_parser(
        "sync",
        help="create/update/pause/delete schedules to match the cron activities",
        description="Idempotent: prints each change, or 'no changes'.",
    )
    _common(p)
    p.set_defaults(func=_schedules_sync)
    for name, text in (
        ("pause", "pause an activity's schedule (stays paused through syncs)"),
        ("resume", "unpause it; the misfire policy handles missed times at the next fire"),
    ):
        p = ssub.add_parser(name, help=text)
        p.add_argument("activity", help="activity id")
        _common(p)
        p.set_defaults(func=_pause_or_resume)
