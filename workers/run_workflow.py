"""RunActivityWorkflow: one per trigger; one TaskInstanceWorkflow child per planned task.

Idempotency (the contract, README "The contract"): the run's workflow id and
``run_id`` come from the trigger; ``log_run`` is an insert-or-nothing; each task
is a child workflow with the id ``task-{run_id}:{task_type}:{index}`` and
REJECT_DUPLICATE. On a replay after a worker restart the SDK finds the child
starts already in history and does not issue them again; the task_instances
upsert covers activity retries. Workflow code only branches on activity results,
so it is deterministic.

The run's row is finished in the same statement as its last task's: each child is
given the plan's size (``run_tasks``), and the step that marks the last of them
succeeded marks the run succeeded too and says so in the child's result. The run's
own finish step is then left out; it runs when any task did not succeed, when the
run holds a flow slot to release, or when no child reported it (a repeated step,
children from before ``run_tasks``): a repeat of a finish changes nothing.

The workflow sandbox re-executes this module for every workflow instance, so it
holds the class and nothing else: every import but ``temporalio.workflow`` is
passed through (loaded once per process).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.common import WorkflowIDReusePolicy
    from temporalio.exceptions import (
        ActivityError,
        ApplicationError,
        ChildWorkflowError,
        WorkflowAlreadyStartedError,
    )

    from schemas.ids import task_workflow_id
    from schemas.status import TASK_OUTCOMES, RunStatus, TaskStatus
    from schemas.workflow_io import (
        RUN_ACTIVITY_WORKFLOW,
        FinishRunInput,
        LogRunInput,
        PlanTasksInput,
        PlanTasksResult,
        RunActivityInput,
        RunActivityResult,
        TaskInstanceInput,
        TaskInstanceResult,
        TaskSpec,
    )
    from workers.activities import RunActivities
    from workers.approvals.stages import run_in_stages
    from workers.flow.order import wait_turn
    from workers.flow.slot import FLOW_WAKE_SIGNAL, FlowHold, Waker, hold_flow_slot, wake
    from workers.hold import wait_while_held
    from workers.lifecycle import Clock, cancelled, cancelled_by_temporal, end_cancelled, guarded
    from workers.steps import db_step, describe
    from workers.task_workflow import TaskInstanceWorkflow

# Patch id of start_run (log_run + plan_tasks as one step). Runs started before it
# replay their recorded two steps; remove the old branch (workflow.deprecate_patch)
# once no such run is open.
_ONE_STEP = "one-step-bookkeeping"
# Patch id of the failure path of a run step refused for good (a data error): the run's
# row is finished failed before the workflow fails.
_STEP_REFUSED = "run-step-refused-finishes-run"


@workflow.defn(name=RUN_ACTIVITY_WORKFLOW)
class RunActivityWorkflow:
    def __init__(self) -> None:
        self._waker = Waker()
        # When a run held by its activity's pause was resumed (workers/hold.py); None: never held.
        self._resumed_at: datetime | None = None
        # True once the run's first task child is started (flow.timeouts' start deadline).
        self._began = False

    @workflow.signal(name=FLOW_WAKE_SIGNAL)
    def flow_wake(self) -> None:
        """A release made room: a run waiting for its concurrency slot asks again now."""
        self._waker.woken = True

    @workflow.run
    async def run(self, inp: RunActivityInput) -> RunActivityResult:
        if workflow.info().workflow_id != inp.workflow_id:
            raise ApplicationError(
                f"started as {workflow.info().workflow_id!r} but the input says "
                f"{inp.workflow_id!r}: start it with the contract id (schemas.ids)",
                type="WorkflowIdMismatch",
                non_retryable=True,
            )
        try:
            return await self._run(inp)
        # Temporal cancelled the run (flow.cancel_on), wherever it was: the clean-up ran
        # on the way out (slot released, task children cancelled); the row is finished
        # cancelled and the workflow closes cancelled (workers/lifecycle.py).
        except BaseException as exc:
            if not cancelled_by_temporal(exc):
                raise
            await end_cancelled(inp)
            raise

    async def _run(self, inp: RunActivityInput) -> RunActivityResult:
        try:
            planned = await self._start(inp)
        # A failed local activity surfaces as its ApplicationError, not wrapped in
        # an ActivityError as a regular activity's failure is: catch both.
        except (ActivityError, ApplicationError) as exc:
            if cancelled(exc):
                raise
            reason = describe(exc)
            try:
                await self._finish(inp.run_id, RunStatus.FAILED)
            except ApplicationError as gone:  # no run row: start_run could not write it
                reason = f"{reason}; and the run has no row to finish ({describe(gone)})"
            raise ApplicationError(
                f"planning failed: {reason}", type="PlanFailed", non_retryable=True
            ) from exc
        # flow.timeouts: the rest runs under the plan's deadlines (workers/lifecycle.py);
        # a plan without them runs it inline, as before (no timer, no command).
        if planned.timeouts is None:
            return await self._body(inp, planned)
        clock = Clock(
            began=lambda: self._began,
            held=lambda: planned.held and self._resumed_at is None,
            resumed_at=lambda: self._resumed_at,
        )
        return await guarded(
            inp, self._body(inp, planned), planned.timeouts, clock, len(planned.tasks)
        )

    async def _body(self, inp: RunActivityInput, planned: PlanTasksResult) -> RunActivityResult:
        # Waits before the first task (issue 39): the activity's hold (ingest activities
        # pause), then the run's turn in its key's line (flow.ordered). Each is a call of
        # its own module's, here, and nothing when the plan says the run needs none.
        # The turn comes first: a held run's resume makes its concurrency slot's round,
        # which must wait for the run's turn (workers/flow/order.py).
        planned = await wait_turn(inp, planned, self._waker)  # workers/flow/order.py
        released = await wait_while_held(inp, planned)  # workers/hold.py
        if released is None:  # held, then skipped on resume: its row says so already
            n = len(planned.tasks)
            return RunActivityResult(inp.run_id, RunStatus.SKIPPED, n, 0, 0, 0, tasks_skipped=n)
        if released is not planned:  # it was held: flow.timeouts' start clock restarts
            self._resumed_at = workflow.now()
            planned = released
        try:
            return await self._run_tasks(inp, planned)
        # A step of the run's own refused for good (a PostgreSQL data error in a slot's
        # admission round, say; a task's failure is a result, not an error): the slot is
        # released by then, and the run's row is finished failed rather than left running.
        # Histories from before this path replay without the patch and fail as they did.
        except (ActivityError, ApplicationError) as exc:
            if cancelled(exc) or not workflow.patched(_STEP_REFUSED):
                raise
            reason = describe(exc)
            await self._finish(inp.run_id, RunStatus.FAILED)
            raise ApplicationError(
                f"run failed: {reason}", type="RunFailed", non_retryable=True
            ) from exc

    async def _run_tasks(
        self, inp: RunActivityInput, planned: PlanTasksResult
    ) -> RunActivityResult:
        # An approval task gates the tasks after it (workers/approvals/stages.py): they
        # are reported skipped when it is not given, and its failure fails the run.
        # flow.concurrency: the tasks run holding one of the limit's slots (per key value);
        # a plan recorded without a slot (no concurrency, or before it existed) holds none.
        # The finish step releases the slot (one step for both).
        slot, grant = planned.flow_slot, planned.flow_grant
        total = len(planned.tasks)
        async with hold_flow_slot(slot, inp.workflow_id, self._waker, grant) as hold:
            results = await run_in_stages(
                inp.run_id, planned.tasks, lambda s: self._child(inp, s, total)
            )
            counts = {s: sum(r.status == s for r in results) for s in TASK_OUTCOMES}
            # A task an operator skipped does not fail the run (it is counted apart).
            status = RunStatus.FAILED if counts[TaskStatus.FAILED] else RunStatus.SUCCEEDED
            # The step that marked the last task succeeded marked the run succeeded too
            # (``run_tasks``): then there is nothing to write, unless a slot is to release
            # or a place in a flow.ordered line to close (and the next run to wake).
            # Decided on the children's recorded results, so a replay decides the same.
            finished = status == RunStatus.SUCCEEDED and any(r.run_finished for r in results)
            in_line = planned.flow_order is not None
            if hold is not None or not finished or in_line:
                await self._finish(inp.run_id, status, hold, in_line)
        return RunActivityResult(
            run_id=inp.run_id,
            status=status,
            tasks_total=len(results),
            tasks_succeeded=counts[TaskStatus.SUCCEEDED],
            tasks_failed=counts[TaskStatus.FAILED],
            tasks_duplicate=len(results) - sum(counts.values()),
            tasks_skipped=counts[TaskStatus.SKIPPED],
        )

    async def _child(
        self, inp: RunActivityInput, spec: TaskSpec, run_tasks: int
    ) -> TaskInstanceResult:
        task_id = task_workflow_id(inp.run_id, spec.task_type, spec.index)
        self._began = True
        try:
            return await workflow.execute_child_workflow(
                TaskInstanceWorkflow.run,
                TaskInstanceInput(
                    task_id,
                    inp.run_id,
                    inp.activity_id,
                    spec,
                    claim_running=True,
                    claim_in_step=True,
                    run_tasks=run_tasks,
                ),
                id=task_id,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            # Only when this run id executes again (e.g. after a reset): the task
            # already ran under this id, so it is not run again.
            workflow.logger.info("task %s was already started; not running it again", task_id)
            return TaskInstanceResult(task_id, TaskStatus.DUPLICATE, "already started")
        except ChildWorkflowError as exc:
            return TaskInstanceResult(task_id, TaskStatus.FAILED, describe(exc))

    async def _start(self, inp: RunActivityInput) -> PlanTasksResult:
        """log_run + plan_tasks: one step (histories from before the patch replay two)."""
        if workflow.patched(_ONE_STEP):
            return await db_step(RunActivities.start_run, PlanTasksInput(inp))  # type: ignore[no-any-return]
        await db_step(RunActivities.log_run, LogRunInput(inp))
        return await db_step(RunActivities.plan_tasks, PlanTasksInput(inp))  # type: ignore[no-any-return]

    async def _finish(
        self, run_id: str, status: str, hold: FlowHold | None = None, in_line: bool = False
    ) -> None:
        release = hold.release_input() if hold is not None else None
        finish = FinishRunInput(run_id, status, release, in_line)
        await wake(await db_step(RunActivities.finish_run, finish))
