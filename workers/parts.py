"""Worker parts: the workflows and activities one worker process serves.

The worker is wired from a list of parts assembled by the composition root
(``app.parts``), so a feature (cron dispatch, permits, fixes, approvals)
plugs in by adding a part factory there, and ``workers/`` never imports the
packages that contribute parts. A factory receives the process's shared
dependencies and returns what to register.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from temporalio.client import Client

from pipeline.settings import Settings
from workers.handlers import Registry, Resources
from workers.settings import WorkerSettings


@dataclass(frozen=True)
class PartDeps:
    """What every part may use; built once per worker process."""

    client: Client
    pool: asyncpg.Pool
    settings: Settings
    worker_settings: WorkerSettings
    registry: Registry
    resources: Resources


@dataclass(frozen=True)
class WorkerPart:
    name: str
    workflows: Sequence[type] = ()
    activities: Sequence[Callable[..., Any]] = ()
    # Coroutines run beside the worker (e.g. gauge refreshers), cancelled at shutdown.
    background: Sequence[Callable[[], Coroutine[Any, Any, None]]] = ()
    # Modules of these workflows the sandbox may load once per process instead of once
    # per workflow instance (workers.sandbox): only modules that hold workflow classes
    # and no mutable module state, importing everything else passed through.
    passthrough: Sequence[str] = ()


PartFactory = Callable[[PartDeps], WorkerPart]

log = logging.getLogger(__name__)
# How often a part's gauges are read again from PostgreSQL.
GAUGE_REFRESH_SECONDS = 5.0


def gauge_refresher(
    what: str, refresh: Callable[[asyncpg.Pool], Awaitable[None]], pool: asyncpg.Pool
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A part's background loop: ``refresh(pool)`` every :data:`GAUGE_REFRESH_SECONDS`; a
    database that does not answer is logged and tried again, never fatal."""

    async def loop() -> None:
        while True:
            try:
                await refresh(pool)
            except (asyncpg.PostgresError, OSError) as exc:
                log.warning("%s gauges not refreshed: %s", what, exc)
            await asyncio.sleep(GAUGE_REFRESH_SECONDS)

    return loop


# The run's workflow modules: stateless, every import passed through (workers.sandbox).
CORE_WORKFLOW_MODULES = ("workers.run_workflow", "workers.task_workflow")


def core_part(deps: PartDeps) -> WorkerPart:
    """RunActivityWorkflow, its TaskInstanceWorkflow children and their activities."""
    from workers.activities import RunActivities, start_metrics_at_zero
    from workers.fix_audit import FixActivities
    from workers.hold_activities import HoldActivities, HoldGauges
    from workers.run_workflow import RunActivityWorkflow
    from workers.task_workflow import TaskInstanceWorkflow

    start_metrics_at_zero(deps.registry.names())
    acts = RunActivities(
        deps.pool, deps.registry, deps.resources, deps.worker_settings.flow_slot_lease_seconds
    )
    fixes = FixActivities(deps.pool)  # TaskInstanceWorkflow's pause-and-fix audit
    # A run held while its activity is paused (workers/hold.py): its step and gauges.
    hold = HoldActivities(deps.pool, deps.worker_settings.flow_slot_lease_seconds)
    return WorkerPart(
        "runs",
        (RunActivityWorkflow, TaskInstanceWorkflow),
        [*acts.all(), *fixes.all(), *hold.all()],
        (gauge_refresher("hold", HoldGauges().refresh, deps.pool),),
        passthrough=CORE_WORKFLOW_MODULES,
    )
