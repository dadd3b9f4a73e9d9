"""flow.timeouts' ``finish`` of an hour on Temporal's time-skipping test server: the
production RunActivityWorkflow (fake steps, ``tests/unit/timers/fakes.py``) whose one
task is an approval waiting for a decision (a 48 h SLA, a workflow-side wait) is past
its deadline an hour after it was created: the task child is cancelled (its row marked
``cancelled``), ``end_run`` finishes the run ``timed_out`` / ``timeout:finish``, and
the workflow completes with that status. The hour passes in a moment; the stack tests
(tests/integration/flow/test_timeouts*.py) cover the same path with seconds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from schemas.workflow_io import (
    EndRunInput,
    EndRunResult,
    FinishRunInput,
    PlanTasksInput,
    PlanTasksResult,
    RunActivityInput,
    RunTimeouts,
    TaskSpec,
)
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes
from workers.run_workflow import RunActivityWorkflow

HOUR = 3600.0


@dataclass
class RunFakes(Fakes):
    """The task's fakes plus the run's own steps: its plan, its finish, its end."""

    plan: PlanTasksResult | None = None
    ended: list[tuple[str, str | None]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    def all(self):  # type: ignore[no-untyped-def]
        return [*super().all(), self.start_run, self.finish_run, self.end_run]

    @activity.defn(name="start_run")
    async def start_run(self, inp: PlanTasksInput) -> PlanTasksResult:
        assert self.plan is not None
        return self.plan

    @activity.defn(name="finish_run")
    async def finish_run(self, inp: FinishRunInput) -> None:
        self.finished.append(inp.status)

    @activity.defn(name="end_run")
    async def end_run(self, inp: EndRunInput) -> EndRunResult:
        self.ended.append((inp.status, inp.ended_by))
        return EndRunResult(inp.status, inp.ended_by)


async def test_a_run_still_waiting_an_hour_after_it_was_created_times_out(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    approval = TaskSpec("approval", 0, {}, {"approvers": ["alice"], "sla_seconds": 48 * HOUR})
    fakes = RunFakes(plan=PlanTasksResult([approval], timeouts=RunTimeouts(finish=HOUR)))
    run = RunActivityInput.for_event(str(uuid.uuid4()), f"e-{uuid.uuid4().hex}", {"data": {}})
    async with fake_worker(fakes) as queue:
        handle = await time_env.client.start_workflow(
            RunActivityWorkflow.run, run, id=run.workflow_id, task_queue=queue
        )
        result = await handle.result()
    assert result.status == "timed_out"
    assert fakes.ended == [("timed_out", "timeout:finish")]
    assert fakes.finished == []  # the end is end_run's alone
    assert fakes.states[-1] == "cancelled"  # the approval task's row
    # Workflow time from the start request to the close (history): the hour, not the
    # approval's 48 h SLA. One durable timer: the deadline (the SLA's is the child's).
    events = [e async for e in handle.fetch_history_events()]
    took = events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert timedelta(hours=1) <= took < timedelta(hours=1, minutes=1), took
    timers = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert len(timers) == 1
