"""``ingest permits list [--resource R]`` and ``ingest permits release R SLOT``.

``list`` prints :func:`workers.permits.report.permit_rows` (the same rows as the
ops service's ``GET /api/permits``).
``release`` signals the slot's *current* run, pinned by run id (``--run-id``
refuses if a newer holder took the slot meanwhile). The holder's handler is not
stopped by a release: the next holder gets a higher fencing token, which is what
stops a stale holder's writes downstream.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import orjson

from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable, db_pool, temporal_client

_FLAGS = ("temporal_address", "namespace", "database_url")


def _settings(args: argparse.Namespace) -> settings.Settings:
    return settings.load_settings(**overrides(args, *_FLAGS))


async def _list(cfg: settings.Settings, resource: str | None, as_json: bool) -> int:
    from workers.permits.report import permit_rows

    pool = await db_pool(cfg.database)
    try:
        out = await permit_rows(pool, await temporal_client(cfg.temporal), resource)
    finally:
        await pool.close()
    if as_json:
        print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
        return 0
    if not out:
        print("no permits acquired yet" + (f" for {resource}" if resource else ""))
        return 0
    print(f"{'RESOURCE':<20} {'SLOT':>4} {'STATE':<22} {'TOKEN':>6} {'AGE/LEASE':>13}  HOLDER")
    for o in out:
        age = f"{o['age_seconds']:.0f}/{o['lease_seconds']}s"
        print(
            f"{o['resource'][:20]:<20} {o['slot']:>4} {o['state'][:22]:<22} {o['token']:>6}"
            f" {age:>13}  {o['holder']}"
        )
    return 0


async def _release(cfg: settings.Settings, resource: str, slot: str, run_id: str | None) -> int:
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    from schemas.ids import permit_workflow_id
    from schemas.workflow_io import PermitReleaseSignal
    from workers.permits.workflow import RELEASE_SIGNAL

    wf_id = permit_workflow_id(resource, slot)
    client = await temporal_client(cfg.temporal)
    try:
        desc = await client.get_workflow_handle(wf_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            print(f"{wf_id}: never acquired", file=sys.stderr)
            return 1
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        print(
            f"{wf_id}: not held (last run {desc.run_id} is {desc.status and desc.status.name})",
            file=sys.stderr,
        )
        return 1
    if run_id is not None and run_id != desc.run_id:
        print(
            f"{wf_id}: held by run {desc.run_id}, not {run_id}; nothing released", file=sys.stderr
        )
        return 1
    # Pinned: the signal goes to this run only, never to a holder that starts after it.
    await client.get_workflow_handle(wf_id, run_id=desc.run_id).signal(
        RELEASE_SIGNAL, PermitReleaseSignal("operator")
    )
    print(f"released {wf_id} (run {desc.run_id})")
    return 0


def _run(args: argparse.Namespace) -> int:
    cfg = _settings(args)
    try:
        if args.permits_command == "list":
            return asyncio.run(_list(cfg, args.resource, args.json))
        return asyncio.run(_release(cfg, args.resource, args.slot, args.run_id))
    except Unreachable as exc:
        print(f"ingest permits {args.permits_command}: {exc}", file=sys.stderr)
        return 1


def _list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resource", help="only this resource")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_flags(p, *_FLAGS)


def _release_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("resource", help="resource name")
    p.add_argument("slot", help="slot number, 0..capacity-1")
    p.add_argument("--run-id", help="release only if this permit run still holds the slot")
    add_flags(p, *_FLAGS)


COMMAND = Command(
    "permits",
    help="scarce-resource permits: list holders, release a slot",
    description="Permits of the resources declared under `resources:` in activity files "
    "(see docs/permits.md). Exit 1 when a dependency is unreachable or nothing matched.",
    actions=(
        Command(
            "list",
            help="every slot acquired so far: state, holder task, fencing token, age vs lease",
            description="One line per (resource, slot) ever acquired. STATE is held, released, "
            "lease_expired, or 'closed (not released)' when Temporal closed the permit run "
            "without a release (its holder was terminated, or the server timeout fired).",
            run=_run,
            flags=_list_flags,
        ),
        Command(
            "release",
            help="operator release of one slot, pinned to its current permit run",
            description="Signal `release` to the open run of permit:RESOURCE:SLOT, addressed by "
            "its run id, so a holder that acquires after this command is never released by it. "
            "The old holder is not stopped: the next holder's higher fencing token fences it. "
            "Exit 1 when the slot is not held.",
            run=_run,
            flags=_release_flags,
        ),
    ),
)
