"""``ingest activities apply|list|pause|resume``: activity definitions in and out, and
holding an activity (:mod:`definitions.pause`; the worker holds its runs, workers/hold.py).

``apply`` validates the whole file before writing anything (exit 2 naming each
bad field, and each task type no worker handler serves: the worker's registry is
asked here, in the command, so :mod:`definitions.files` stays free of it), upserts
every activity in one transaction, then reconciles the schedules (``--no-sync``
to skip). ``dedupe_key_strategy`` is stored and listed, never read at run time
(it is legacy metadata of the idempotency contract: content dedupe belongs to a
task's ``idempotency_key``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from app.client_flags import add_connection_flags, run_with_pool
from app.command import Command
from pipeline import settings
from pipeline.clients import Unreachable, temporal_client
from schemas.definitions import ActivityFile


async def _apply_permits(pool: asyncpg.Pool, parsed: ActivityFile, file: str) -> int:
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


def _known_task_types(handlers: str | None) -> list[str]:
    """The task types a worker runs with these handlers (``--handlers`` or
    ``INGEST_TASK_HANDLERS``, plus entry points and built-ins); ConfigError if bad."""
    from workers.handlers.registry import known_task_types
    from workers.settings import load_worker_settings

    return known_task_types(load_worker_settings(task_handlers=handlers).task_handlers)


def _warn_run_sizes(file: str, parsed: ActivityFile) -> None:
    """A warning per event activity whose run cannot carry an event of the largest size
    ingress forwards (``INGEST_MAX_EVENT_BYTES``): such events are dead-lettered
    ``run_too_large`` by the router, the smaller ones run. A warning, not a refusal: at
    the default 1 MB limit every activity of 3 tasks or more would be refused."""
    from definitions import files
    from router.settings import load_router_settings

    limit = load_router_settings().max_event_bytes
    for i, act in enumerate(parsed.activities):
        if (problem := files.run_size_problem(act, limit)) is not None:
            print(
                f"{file}: warning: activities[{i}].tasks: {problem}; larger events go to the"
                " DLQ as run_too_large",
                file=sys.stderr,
            )


def _check_webhooks(file: str, parsed: Any) -> None:
    """Refuse a webhook task whose config writes a credential into the definition (it
    would sit in the activities table and in Temporal history): secrets go by reference,
    ``headers_from_env`` / ``headers_from_file`` (docs/workers.md). A URL with userinfo
    or a query only warns."""
    from definitions import files
    from workers.handlers.webhook_secrets import webhook_config_problems, webhook_config_warnings

    problems = []
    for i, act in enumerate(parsed.activities):
        for j, task in enumerate(act.tasks):
            if task.type != "webhook":
                continue
            where = f"activities[{i}].tasks[{j}].config"
            problems += [f"{where}: {p}" for p in webhook_config_problems(task.config)]
            for warning in webhook_config_warnings(task.config):
                print(f"{file}: warning: {where}: {warning}", file=sys.stderr)
    if problems:
        raise files.FileError(problems)


def _apply(args: argparse.Namespace) -> int:
    from app.commands.schedules import sync_and_print
    from definitions import files, store

    try:
        parsed = files.load(Path(args.file))
        files.check_task_types(parsed, _known_task_types(args.handlers))
        _check_webhooks(args.file, parsed)
    except files.FileError as exc:
        for problem in exc.problems:
            print(f"{args.file}: {problem}", file=sys.stderr)
        return 2
    _warn_run_sizes(args.file, parsed)

    async def work(cfg: settings.Settings, pool: asyncpg.Pool) -> int:
        if (code := await _apply_permits(pool, parsed, args.file)) != 0:
            return code
        results = await store.upsert(pool, list(parsed.activities))
        for act, result in zip(parsed.activities, results, strict=True):
            print(f"{result:<8} activity {act.id} ({act.name})")
        if args.no_sync:
            return 0
        try:
            return await sync_and_print(cfg, pool)
        except Unreachable as exc:
            print(
                f"activities saved, schedules NOT synced: {exc}; run `ingest schedules sync`",
                file=sys.stderr,
            )
            return 1

    return run_with_pool(args, work, "activities apply")


def _list(args: argparse.Namespace) -> int:
    from definitions import pause, store

    async def work(cfg: settings.Settings, pool: asyncpg.Pool) -> int:
        rows = [store.to_json(r) for r in await store.all_rows(pool)]
        held = await pause.states(pool)
        for r in rows:  # the pause (ingest activities pause) and the runs it holds
            paused_at, paused_by, n = held.get(r["id"], (None, None, 0))
            r["paused_at"] = paused_at.isoformat() if paused_at else None
            r["paused_by"] = paused_by
            r["held_runs"] = n
        if args.json:
            print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
            return 0
        print(
            f"{'ID':<36}  {'NAME':<24}  {'ENABLED':<7}  {'TRIGGER':<40}  "
            f"{'PAUSED':<6}  {'HELD':>5}  DEDUPE_KEY_STRATEGY"
        )
        for r in rows:
            t = r["trigger"]
            trig = (
                f"event {t['event_type']}"
                if t["type"] == "event"
                else f"cron {t['cron']} {t.get('timezone', 'UTC')} {t.get('misfire_policy')}"
            )
            print(
                f"{r['id']:<36}  {r['name'][:24]:<24}  {r['enabled']!s:<7}  {trig[:40]:<40}  "
                f"{'yes' if r['paused_at'] else 'no':<6}  {r['held_runs']:>5}  "
                f"{r['dedupe_key_strategy'] or '-'}"
            )
        return 0

    return run_with_pool(args, work, "activities list")


def _actor(args: argparse.Namespace) -> str:
    """Who acts (``--actor``, else the OS user), as the ops API's ``actor``."""
    import getpass

    if args.actor:
        return str(args.actor)
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


async def _schedule(cfg: settings.Settings, pool: asyncpg.Pool, act: Any) -> int:
    """Pause or unpause a cron activity's schedule as its pause says (0, or 1 when
    Temporal did not answer: the held runs are still held by the worker)."""
    from scheduler.sync import ensure_one

    if not act.cron:
        return 0
    try:
        client = await temporal_client(cfg.temporal)
        changes = await ensure_one(client, pool, act.id, cfg.temporal.task_queue)
    except Unreachable as exc:
        print(f"schedule NOT changed: {exc}; run `ingest schedules sync`", file=sys.stderr)
        return 1
    for change in changes:
        print(f"schedule: {change}")
    if not changes:
        print("schedule: no change")
    return 0


def _pause(args: argparse.Namespace) -> int:
    from definitions import pause

    async def work(cfg: settings.Settings, pool: asyncpg.Pool) -> int:
        act = await pause.find(pool, args.activity)
        if act is None:
            print(f"no activity (or several) with id or name {args.activity!r}", file=sys.stderr)
            return 1
        got = await pause.pause(pool, act, _actor(args), args.reason)
        what = "paused" if got.changed else "already paused"
        why = f": {got.reason}" if got.reason else ""
        print(
            f"{what} activity {act.id} ({act.name}) since {got.paused_at.isoformat()}"
            f" by {got.paused_by}{why}; {got.held} run(s) held"
        )
        return await _schedule(cfg, pool, act)

    return run_with_pool(args, work, "activities pause")


def _resume(args: argparse.Namespace) -> int:
    from definitions import pause

    async def work(cfg: settings.Settings, pool: asyncpg.Pool) -> int:
        act = await pause.find(pool, args.activity)
        if act is None:
            print(f"no activity (or several) with id or name {args.activity!r}", file=sys.stderr)
            return 1
        got = await pause.resume(pool, act, _actor(args), skip_held=args.skip_held)
        state = "resumed" if got.was_paused else "was not paused;"
        print(
            f"{state} activity {act.id} ({act.name}): {len(got.held) + len(got.skipped)}"
            f" run(s) held, {len(got.held)} resumed, {len(got.skipped)} skipped"
        )
        code = await _schedule(cfg, pool, act)
        try:
            client = await temporal_client(cfg.temporal)
            sent, gone = await pause.signal_held(client, got.skipped + got.held)
        except Unreachable as exc:
            print(
                f"held runs NOT signalled: {exc}; they go on at their next check"
                " (within 15 min), or run resume again",
                file=sys.stderr,
            )
            return 1
        print(f"signalled {sent} run(s) in the order of their triggers")
        for wid in gone:
            print(f"warning: {wid} is no longer open; its row stays held", file=sys.stderr)
        return code

    return run_with_pool(args, work, "activities resume")


def _pause_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("activity", help="activity id or name")
    p.add_argument("--reason", help="why (kept with the pause, shown by list)")
    p.add_argument("--actor", help="who pauses (default cli:<OS user>)")
    add_connection_flags(p)


def _resume_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("activity", help="activity id or name")
    p.add_argument(
        "--skip-held",
        action="store_true",
        help="record the runs held meanwhile as skipped (ended_by held:skipped): no task runs",
    )
    p.add_argument("--actor", help="who resumes (default cli:<OS user>)")
    add_connection_flags(p)


def _apply_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="path to a .json, .yaml or .yml file")
    p.add_argument("--no-sync", action="store_true", help="do not touch Temporal Schedules")
    p.add_argument(
        "--handlers",
        help="the workers' extra task handlers 'mod:func,mod2', to check task types against "
        "(env INGEST_TASK_HANDLERS)",
    )
    add_connection_flags(p)


def _list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="JSON, every stored field")
    add_connection_flags(p)


COMMAND = Command(
    "activities",
    help="apply, list, pause or resume activities",
    actions=(
        Command(
            "apply",
            help="validate a JSON/YAML file of activities, upsert them, sync schedules",
            description="Validate FILE ({'activities': [...]}) completely, then upsert every "
            "activity and reconcile the Temporal Schedules of cron activities. Exit 2 "
            "naming each bad field (e.g. activities[1].trigger.misfire_policy, or a task "
            "type no handler serves: built-ins, entry points, INGEST_TASK_HANDLERS) without "
            "writing anything.",
            run=_apply,
            flags=_apply_flags,
        ),
        Command("list", help="list activities (table, or --json)", run=_list, flags=_list_flags),
        Command(
            "pause",
            help="hold an activity: its new runs are recorded held and start no task",
            description="Pause ACTIVITY (id or name). Runs triggered while it is paused are "
            "recorded 'held' by the worker and start no task until `resume`; a cron "
            "activity's schedule is paused too (its misfire policy applies on resume). "
            "Runs already past their first step go on. Idempotent.",
            run=_pause,
            flags=_pause_flags,
        ),
        Command(
            "resume",
            help="resume a paused activity: its held runs start, oldest trigger first",
            description="Clear ACTIVITY's pause, unpause its schedule, and wake its held "
            "runs in the order of their triggers; with --skip-held they are recorded "
            "skipped instead and run no task.",
            run=_resume,
            flags=_resume_flags,
        ),
    ),
)
