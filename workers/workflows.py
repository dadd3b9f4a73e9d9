"""RunActivityWorkflow (one per trigger) and TaskInstanceWorkflow (one per planned task).

Idempotency (the contract, README "The contract"): the run's workflow id and
``run_id`` come from the trigger; ``log_run`` is an insert-or-nothing; each task
is a child workflow with the id ``task-{run_id}:{task_type}:{index}`` and
REJECT_DUPLICATE. On a replay after a worker restart the SDK finds the child
starts already in history and does not issue them again; the task_instances
upsert covers activity retries. Workflow code only branches on activity results,
so it is deterministic.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import (
        ActivityError,
        ApplicationError,
        ChildWorkflowError,
        WorkflowAlreadyStartedError,
    )

    from schemas.approval_io import (
        APPROVAL_TASK_TYPE,
        ApprovalDecision,
        ApprovalResubmission,
        ApprovalState,
        ApprovalUpdateResult,
    )
    from schemas.ids import task_workflow_id
    from schemas.workflow_io import (
        RUN_ACTIVITY_WORKFLOW,
        FinishRunInput,
        LogRunInput,
        PermitGrant,
        PlanTasksInput,
        PlanTasksResult,
        RunActivityInput,
        RunActivityResult,
        RunHandlerInput,
        TaskInstanceInput,
        TaskInstanceResult,
        TaskSpec,
        TaskStateInput,
        TaskStateResult,
    )
    from workers.activities import RunActivities
    from workers.approvals import rules as approval_rules
    from workers.approvals.flow import ApprovalFlow
    from workers.approvals.stages import run_in_stages
    from workers.fixes import PausableTask
    from workers.options import handler_options
    from workers.permits.scope import hold_permit

# Bookkeeping activities only touch PostgreSQL: retry them without limit (a
# database outage delays runs, never fails them), with a capped backoff.
_DB_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)  # fmt: skip
_DB_TIMEOUT = timedelta(seconds=30)
# Patch id of start_run (log_run + plan_tasks as one step). Runs started before it
# replay their recorded two steps; remove the old branch (workflow.deprecate_patch)
# once no such run is open.
_ONE_STEP = "one-step-bookkeeping"
# Task outcomes a run counts; the rest of its tasks are duplicates.
_COUNTED = ("succeeded", "failed", "skipped")


async def _db(method, arg):  # type: ignore[no-untyped-def]
    """A bookkeeping step (one short, idempotent PostgreSQL statement) as a local activity.

    Local, not regular: it runs inside the worker's workflow task and is recorded
    as a marker, so a run costs a handful of server round trips instead of one
    schedule/poll/complete cycle per row written. That is safe here because each
    step is an idempotent upsert; a retry after a worker crash repeats it with the
    same outcome. Task handlers stay regular activities (long, heartbeating).
    """
    return await workflow.execute_local_activity_method(
        method, arg, start_to_close_timeout=_DB_TIMEOUT, retry_policy=_DB_RETRY
    )


def describe(exc: BaseException) -> str:
    """``Type: message`` of the innermost cause (what task rows store as last_error)."""
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, ApplicationError) and cause.type:
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}"


@workflow.defn(name="TaskInstanceWorkflow")
class TaskInstanceWorkflow(PausableTask):
    @workflow.init
    def __init__(self, inp: TaskInstanceInput) -> None:
        super().__init__()
        # Approval tasks wait for a person here (workers/approvals); built before run()
        # so their updates and query have their state from the first workflow task.
        self._approval = ApprovalFlow(inp) if inp.spec.task_type == APPROVAL_TASK_TYPE else None

    @workflow.run
    async def run(self, inp: TaskInstanceInput) -> TaskInstanceResult:
        if inp.continued is None:  # a run continued as new was claimed by the first one
            claim = await self._claim(inp)
            if not claim.claimed:
                return TaskInstanceResult(inp.task_id, "duplicate")
            if claim.status in ("succeeded", "failed", "skipped"):  # finished earlier
                return TaskInstanceResult(inp.task_id, claim.status)
        try:
            if self._approval is not None:
                await self._approval.run()  # raises ApprovalRejected (a ValueError)
                status = "succeeded"
            else:
                # on_failure=pause: a permanent failure waits for a fix (workers.fixes); the
                # permit is held per attempt, so a paused task holds none while it waits.
                status = await self._recoverable(inp, self._attempt, describe)
        except (ActivityError, ValueError) as exc:
            error = describe(exc)
            await self._state(inp, "failed", error)
            return TaskInstanceResult(inp.task_id, "failed", error)
        if status == "succeeded":
            await self._state(inp, "succeeded")
        return TaskInstanceResult(inp.task_id, status)

    async def _attempt(self, inp: TaskInstanceInput) -> None:
        """One handler execution, holding the task's permit (if it asks for one)."""
        async with hold_permit(inp.task_id, inp.spec.permit) as permit:
            await self._execute(inp, permit)

    async def _execute(self, inp: TaskInstanceInput, permit: PermitGrant | None = None) -> None:
        """One execution of the task's handler activity, with its own retry policy.

        Raises ActivityError when the handler fails for good (non-retryable, or
        retries exhausted) and ValueError for a bad handler config.
        """
        opts = handler_options(inp.spec.config)
        await workflow.execute_activity_method(
            RunActivities.run_handler,
            RunHandlerInput(inp.task_id, inp.run_id, inp.activity_id, inp.spec, permit),
            start_to_close_timeout=timedelta(seconds=opts.timeout_seconds),
            heartbeat_timeout=timedelta(seconds=opts.heartbeat_timeout_seconds),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=opts.retry_initial_seconds),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=opts.retry_max_interval_seconds),
                maximum_attempts=opts.max_attempts,
            ),
        )

    async def _claim(self, inp: TaskInstanceInput) -> TaskStateResult:
        """Claim the task and mark it running: one step (children started before
        ``claim_running`` existed replay the two steps they recorded)."""
        if inp.claim_running:
            return await _db(
                RunActivities.set_task_state,
                TaskStateInput(inp.task_id, inp.run_id, inp.spec, "running", claim=True),
            )
        claim = await self._state(inp, "pending")
        if claim.claimed and claim.status not in ("succeeded", "failed", "skipped"):
            await self._state(inp, "running")
        return claim

    async def _state(
        self, inp: TaskInstanceInput, status: str, error: str | None = None
    ) -> TaskStateResult:
        return await _db(  # type: ignore[no-any-return]
            RunActivities.set_task_state,
            TaskStateInput(inp.task_id, inp.run_id, inp.spec, status, error),
        )

    # --- approvals: thin handlers; the logic is workers/approvals/flow.py ------------

    @workflow.update
    async def decide(self, d: ApprovalDecision) -> ApprovalUpdateResult:
        return await self._flow().decide(d)

    @decide.validator
    def _check_decide(self, d: ApprovalDecision) -> None:
        self._flow().check_decision(d)

    @workflow.update
    async def resubmit(self, r: ApprovalResubmission) -> ApprovalUpdateResult:
        return await self._flow().resubmit(r)

    @resubmit.validator
    def _check_resubmit(self, r: ApprovalResubmission) -> None:
        self._flow().check_resubmission(r)

    @workflow.query
    def approval(self) -> ApprovalState | None:
        return self._approval.snapshot() if self._approval is not None else None

    def _flow(self) -> ApprovalFlow:
        if self._approval is None:
            raise approval_rules.refuse(
                approval_rules.NOT_AN_APPROVAL, f"{workflow.info().workflow_id} is not an approval"
            )
        return self._approval


@workflow.defn(name=RUN_ACTIVITY_WORKFLOW)
class RunActivityWorkflow:
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
            planned = await self._start(inp)
        # A failed local activity surfaces as its ApplicationError, not wrapped in
        # an ActivityError as a regular activity's failure is: catch both.
        except (ActivityError, ApplicationError) as exc:
            await self._finish(inp.run_id, "failed")
            raise ApplicationError(
                f"planning failed: {describe(exc)}", type="PlanFailed", non_retryable=True
            ) from exc
        # An approval task gates the tasks after it (workers/approvals/stages.py): they
        # are reported skipped when it is not given, and its failure fails the run.
        results = await run_in_stages(inp.run_id, planned.tasks, lambda s: self._child(inp, s))
        counts = {s: sum(r.status == s for r in results) for s in _COUNTED}
        # A task an operator skipped does not fail the run (it is counted apart).
        status = "failed" if counts["failed"] else "succeeded"
        await self._finish(inp.run_id, status)
        return RunActivityResult(
            run_id=inp.run_id,
            status=status,
            tasks_total=len(results),
            tasks_succeeded=counts["succeeded"],
            tasks_failed=counts["failed"],
            tasks_duplicate=len(results) - sum(counts.values()),
            tasks_skipped=counts["skipped"],
        )

    async def _child(self, inp: RunActivityInput, spec: TaskSpec) -> TaskInstanceResult:
        task_id = task_workflow_id(inp.run_id, spec.task_type, spec.index)
        try:
            return await workflow.execute_child_workflow(
                TaskInstanceWorkflow.run,
                TaskInstanceInput(task_id, inp.run_id, inp.activity_id, spec, claim_running=True),
                id=task_id,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            # Only when this run id executes again (e.g. after a reset): the task
            # already ran under this id, so it is not run again.
            workflow.logger.info("task %s was already started; not running it again", task_id)
            return TaskInstanceResult(task_id, "duplicate", "already started")
        except ChildWorkflowError as exc:
            return TaskInstanceResult(task_id, "failed", describe(exc))

    async def _start(self, inp: RunActivityInput) -> PlanTasksResult:
        """log_run + plan_tasks: one step (histories from before the patch replay two)."""
        if workflow.patched(_ONE_STEP):
            return await _db(RunActivities.start_run, PlanTasksInput(inp))  # type: ignore[no-any-return]
        await _db(RunActivities.log_run, LogRunInput(inp))
        return await _db(RunActivities.plan_tasks, PlanTasksInput(inp))  # type: ignore[no-any-return]

    async def _finish(self, run_id: str, status: str) -> None:
        await _db(RunActivities.finish_run, FinishRunInput(run_id, status))
