"""An approval gates the tasks planned after it (RunActivityWorkflow, workflow code).

The planned tasks are cut into stages at each approval task: the tasks before it
run (concurrently, as every task of a run without approvals does), then the
approval waits for its decision, and only an approval that succeeds lets the next
stage start. When it is rejected (or auto-rejected, expired, a duplicate), the
tasks after it are not started and are reported ``skipped``; the run fails.
A plan without approval tasks is one stage: all its tasks run concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from schemas.approval_io import APPROVAL_TASK_TYPE
from schemas.ids import task_workflow_id
from schemas.status import TaskStatus
from schemas.workflow_io import TaskInstanceResult, TaskSpec


def stages(tasks: Sequence[TaskSpec]) -> list[list[TaskSpec]]:
    """Consecutive non-approval tasks form one stage; each approval is a stage of its own."""
    out: list[list[TaskSpec]] = []
    for spec in tasks:
        if spec.task_type == APPROVAL_TASK_TYPE or not out or _is_gate(out[-1]):
            out.append([spec])
        else:
            out[-1].append(spec)
    return out


def _is_gate(stage: list[TaskSpec]) -> bool:
    return stage[0].task_type == APPROVAL_TASK_TYPE


async def run_in_stages(
    run_id: str,
    tasks: Sequence[TaskSpec],
    run_task: Callable[[TaskSpec], Awaitable[TaskInstanceResult]],
) -> list[TaskInstanceResult]:
    """Results in plan order; tasks behind an approval that was not given are skipped."""
    results: list[TaskInstanceResult] = []
    blocked: str | None = None
    for stage in stages(tasks):
        if blocked is not None:
            results += [
                TaskInstanceResult(
                    task_workflow_id(run_id, s.task_type, s.index), TaskStatus.SKIPPED, blocked
                )
                for s in stage
            ]
            continue
        done = await asyncio.gather(*(run_task(s) for s in stage))
        results += done
        if _is_gate(stage) and done[0].status != TaskStatus.SUCCEEDED:
            blocked = f"not run: approval {done[0].task_id} was not given ({done[0].status})"
    return results
