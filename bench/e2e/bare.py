"""(a) of bench.e2e: the bare Temporal shape the project's workflow is compared with.

A parent workflow starts ``tasks`` children; each child runs one no-op activity.
No database, no local activities: what Temporal alone costs for the task shape of
RunActivityWorkflow (parent -> child per task -> handler activity).
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


@activity.defn(name="bench_bare_noop")
async def bare_noop(task_id: str) -> None:
    """The no-op handler (the activity, without the handler registry around it)."""


@workflow.defn(name="BenchBareChild")
class BareChild:
    @workflow.run
    async def run(self, task_id: str) -> str:
        await workflow.execute_activity(
            bare_noop, task_id, start_to_close_timeout=timedelta(seconds=300)
        )
        return "succeeded"


@workflow.defn(name="BenchBareParent")
class BareParent:
    @workflow.run
    async def run(self, inp: BareInput) -> int:
        wid = workflow.info().workflow_id
        results = await asyncio.gather(
            *(
                workflow.execute_child_workflow(BareChild.run, f"{wid}:{i}", id=f"{wid}:{i}")
                for i in range(inp.tasks)
            )
        )
        return len(results)
