"""(a) of bench.e2e: the bare Temporal shape the project's workflow is compared with.

A parent workflow starts ``tasks`` children; each child runs one no-op activity.
No database, no local activities: what Temporal alone costs for the task shape of
RunActivityWorkflow (parent -> child per task -> handler activity).

With ``BareInput.local`` each child runs its no-op as a local activity instead:
the same technique the project uses for short handlers, applied to the bare
shape, so the benchmark can show what the project's own bookkeeping costs on
top of it (phase a_local).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow

# Passed through the sandbox like the project's workflow modules (workers.sandbox).
BARE_MODULES = ("bench.e2e.bare",)


@dataclass(frozen=True)
class BareInput:
    tasks: int
    local: bool = False


@dataclass(frozen=True)
class BareTask:
    task_id: str
    local: bool = False


@activity.defn(name="bench_bare_noop")
async def bare_noop(task_id: str) -> None:
    """The no-op handler (the activity, without the handler registry around it)."""


@workflow.defn(name="BenchBareChild")
class BareChild:
    @workflow.run
    async def run(self, task: BareTask) -> str:
        # Only matters when a dispatch is lost: on the real server under a load spike a
        # persistence timeout once lost one, and the run waited out this timeout (was 300 s).
        timeout = timedelta(seconds=30)
        if task.local:
            await workflow.execute_local_activity(
                bare_noop, task.task_id, start_to_close_timeout=timeout
            )
        else:
            await workflow.execute_activity(bare_noop, task.task_id, start_to_close_timeout=timeout)
        return "succeeded"


@workflow.defn(name="BenchBareParent")
class BareParent:
    @workflow.run
    async def run(self, inp: BareInput) -> int:
        wid = workflow.info().workflow_id
        results = await asyncio.gather(
            *(
                workflow.execute_child_workflow(
                    BareChild.run, BareTask(f"{wid}:{i}", inp.local), id=f"{wid}:{i}"
                )
                for i in range(inp.tasks)
            )
        )
        return len(results)
