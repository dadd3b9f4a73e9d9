"""TaskInstanceWorkflow: one per planned task (workflow id ``task-{run_id}:{type}:{index}``).

The workflow sandbox re-executes this module for every workflow instance, so it
holds the class and nothing else: every import but ``temporalio.workflow`` is
passed through (loaded once per process). Keep it that way; the unit test
``tests/unit/workers/test_sandbox.py`` fails on an import the sandbox would
reload per instance.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from datetime import timedelta

    from temporalio.common import RetryPolicy
    from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

    from schemas.approval_io import (
        APPROVAL_TASK_TYPE,
        ApprovalDecision,
        ApprovalResubmission,
        ApprovalState,
        ApprovalUpdateResult,
    )
    from schemas.status import TASK_OUTCOMES, TaskStatus
    from schemas.workflow_io import (
        LocalTaskResult,
        PermitGrant,
        RunHandlerInput,
        TaskInstanceInput,
        TaskInstanceResult,
        TaskStateInput,
        TaskStateResult,
    )
    from workers.activities import RunActivities
    from workers.approvals import rules as approval_rules
    from workers.approvals.machine import ApprovalFlow
    from workers.errors import TaskConfigError, TaskFailed, TaskSettled
    from workers.fixes import PausableTask
    from workers.options import handler_options
    from workers.permits.scope import hold_permit
    from workers.steps import db_step, describe, local_step

# Patch id of the failure path of a step refused for good (a data error): the task is
# marked failed and the workflow completes. Remove the old branch (deprecate_patch) once
# no run recorded before it is open.
_STEP_REFUSED = "step-refused-fails-task"
# Patch id of the cancellation path: a cancelled task's row is marked cancelled.
_CANCELLED = "task-cancel-marks-task"


@workflow.defn(name="TaskInstanceWorkflow")
class TaskInstanceWorkflow(PausableTask):
    @workflow.init
    def __init__(self, inp: TaskInstanceInput) -> None:
        super().__init__()
        # True once a short handler's step has marked the task succeeded itself.
        self._finished = False
        # True once a step marking this task succeeded also marked the run succeeded.
        self._run_finished = False
        # Approval tasks wait for a person here (workers/approvals); built before run()
        # so their updates and query have their state from the first workflow task.
        self._approval = ApprovalFlow(inp) if inp.spec.task_type == APPROVAL_TASK_TYPE else None
        # True until the first handler step of a task claimed in that step: a local
        # task holding no permit, whose parent allows it (``claim_in_step``).
        self._unclaimed = (
            inp.claim_in_step
            and inp.continued is None
            and inp.spec.local
            and inp.spec.permit is None
            and self._approval is None
        )

    @workflow.run
    async def run(self, inp: TaskInstanceInput) -> TaskInstanceResult:
        try:
            return await self._run(inp)
        # Its run was cancelled (flow.cancel_on) or timed out (flow.timeouts), and the
        # parent cancelled this child: the handler in progress got Temporal's activity
        # cancellation; the task's row says cancelled (not running, not failed), and the
        # workflow closes cancelled. Histories from before replay without the patch.
        except BaseException as exc:
            if not _cancelled(exc):
                raise
            # The parent forwards its own reason (a timeout's); a run cancelled through
            # Temporal gives its child none, and the step names the run's request.
            reason = workflow.cancellation_reason()
            await self._state(inp, TaskStatus.CANCELLED, f"cancelled: {reason}" if reason else None)
            raise

    async def _run(self, inp: TaskInstanceInput) -> TaskInstanceResult:
        try:
            # A run continued as new was claimed by the first one; a task whose handler
            # step claims it is claimed there (``_claim_and_run``).
            if inp.continued is None and not self._unclaimed:
                _settle(await self._claim(inp))
            if self._approval is not None:
                await self._approval.run()  # raises ApprovalRejected (a TaskFailed)
                status: str = TaskStatus.SUCCEEDED
            else:
                # on_failure=pause: a permanent failure waits for a fix (workers.fixes); the
                # permit is held per attempt, so a paused task holds none while it waits.
                status = await self._recoverable(inp, self._attempt, describe)
        except TaskSettled as settled:  # the claim found a duplicate, or a task done earlier
            return TaskInstanceResult(inp.task_id, settled.status)
        # A failed handler, or an outcome decided here; anything else is a bug and fails
        # the workflow task (a fixed worker then replays it), not the task.
        except (ActivityError, TaskFailed, TaskConfigError) as exc:
            if _cancelled(exc):
                raise
            error = describe(exc)
            await self._state(inp, TaskStatus.FAILED, error)
            return TaskInstanceResult(inp.task_id, TaskStatus.FAILED, error)
        # A bookkeeping step refused for good: a PostgreSQL data error (workers.data_errors),
        # e.g. a claim whose payload jsonb cannot hold. Such a step wrote nothing, so the
        # task fails here, even under on_failure=pause (the claim precedes the handler a
        # fix would run again, and holds no key); the "failed" step writes the task's row
        # if the claim did not (``fail_unclaimed``). Histories from before this path (the
        # error failed the workflow) replay without the patch and take that path again.
        except ApplicationError as exc:
            if not workflow.patched(_STEP_REFUSED):
                raise
            error = describe(exc)
            workflow.logger.warning("task %s fails: a step was refused: %s", inp.task_id, error)
            await self._state(inp, TaskStatus.FAILED, error)
            return TaskInstanceResult(inp.task_id, TaskStatus.FAILED, error)
        if status == TaskStatus.SUCCEEDED and not self._finished:  # a short handler's step may have
            self._run_finished = (await self._state(inp, TaskStatus.SUCCEEDED)).run_finished
        return TaskInstanceResult(inp.task_id, status, run_finished=self._run_finished)

    async def _attempt(self, inp: TaskInstanceInput) -> None:
        """One handler execution, holding the task's permit (if it asks for one)."""
        async with hold_permit(inp.task_id, inp.spec.permit) as permit:
            await self._execute(inp, permit)

    async def _execute(self, inp: TaskInstanceInput, permit: PermitGrant | None = None) -> None:
        """One execution of the task's handler activity, with its own retry policy.

        A short handler (``TaskSpec.local``, decided by the plan) runs as a local
        activity: inside this workflow's task, recorded as a marker, so a task costs
        no activity schedule/poll/complete cycle on the server. That step also marks
        the task succeeded (``RunHandlerInput.finish``; if it could not, the workflow's
        own step does), and its first run claims the task too (``_claim_and_run``).
        Its failure is raised as the same ActivityError a regular activity's is
        (``workers.steps``).

        Raises ActivityError when the handler fails for good (non-retryable, or
        retries exhausted) and TaskConfigError for a bad handler config.
        """
        opts = handler_options(inp.spec.config)
        local = inp.spec.local
        arg = RunHandlerInput(
            inp.task_id, inp.run_id, inp.activity_id, inp.spec, permit, local, inp.run_tasks
        )
        timeout = timedelta(seconds=opts.timeout_seconds)
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=opts.retry_initial_seconds),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=opts.retry_max_interval_seconds),
            maximum_attempts=opts.max_attempts,
        )
        if local:
            options = {"start_to_close_timeout": timeout, "retry_policy": retry}
            if self._unclaimed:
                self._finished = await self._claim_and_run(inp, arg, options)
            else:
                self._finished = await local_step(RunActivities.run_handler, arg, **options)
            return
        await workflow.execute_activity_method(
            RunActivities.run_handler,
            arg,
            start_to_close_timeout=timeout,
            heartbeat_timeout=timedelta(seconds=opts.heartbeat_timeout_seconds),
            retry_policy=retry,
        )

    async def _claim_and_run(
        self, inp: TaskInstanceInput, arg: RunHandlerInput, options: dict[str, object]
    ) -> bool:
        """The first handler step of a ``claim_in_step`` task: claim, handler and finish
        in one local activity. Raises TaskSettled when the claim finds the task
        settled (no handler ran), ActivityError when the handler failed.

        When the step failed, or could not claim (the database), the workflow's own
        claim step makes sure the task is claimed before anything else is written; a
        repeat of a claim made changes nothing.
        """
        self._unclaimed = False
        try:
            done: LocalTaskResult = await local_step(RunActivities.run_local_task, arg, **options)
        except ActivityError:
            _settle(await self._claim(inp))
            raise
        if done.claim is None:
            _settle(await self._claim(inp))
            return await local_step(RunActivities.run_handler, arg, **options)  # type: ignore[no-any-return]
        _settle(done.claim)
        self._run_finished = done.run_finished
        return done.finished

    async def _claim(self, inp: TaskInstanceInput) -> TaskStateResult:
        """Claim the task and mark it running: one step (children started before
        ``claim_running`` existed replay the two steps they recorded)."""
        if inp.claim_running:
            return await db_step(  # type: ignore[no-any-return]
                RunActivities.set_task_state,
                TaskStateInput(inp.task_id, inp.run_id, inp.spec, TaskStatus.RUNNING, claim=True),
            )
        claim = await self._state(inp, TaskStatus.PENDING)
        if claim.claimed and claim.status not in TASK_OUTCOMES:
            await self._state(inp, TaskStatus.RUNNING)
        return claim

    async def _state(
        self, inp: TaskInstanceInput, status: str, error: str | None = None
    ) -> TaskStateResult:
        # Only a claim ("pending") stores the spec; other steps send its key, not the
        # payload again (a step's input is not in history, so replay is unaffected).
        spec = inp.spec if status == TaskStatus.PENDING else inp.spec.key_only()
        total = inp.run_tasks if status == TaskStatus.SUCCEEDED else None
        return await db_step(  # type: ignore[no-any-return]
            RunActivities.set_task_state,
            TaskStateInput(inp.task_id, inp.run_id, spec, status, error, run_tasks=total),
        )

    # --- approvals: thin handlers; the logic is workers/approvals/machine.py ------------

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


def _cancelled(exc: BaseException) -> bool:
    """``exc`` is the cancellation of this task by Temporal (its run's cancellation)."""
    return (
        is_cancelled_exception(exc)
        and workflow.cancellation_reason() is not None
        and workflow.patched(_CANCELLED)
    )


def _settle(claim: TaskStateResult) -> None:
    """Raise TaskSettled unless the claim lets the handler run."""
    if not claim.claimed:
        raise TaskSettled(TaskStatus.DUPLICATE)
    if claim.status in TASK_OUTCOMES:  # finished earlier
        raise TaskSettled(claim.status)
