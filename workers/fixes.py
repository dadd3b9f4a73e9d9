"""Pause-and-fix: a task whose handler fails for good waits for an operator.

``TaskInstanceWorkflow`` inherits :class:`PausableTask` and runs its handler
through :meth:`PausableTask._recoverable` (a recoverable step: on a permanent
failure the workflow waits for an operator's update, then retries). For a task
whose ``on_failure`` is ``pause``, a permanent handler failure (non-retryable,
or retries exhausted) does not fail the task:

1. the task row becomes ``pending_fix`` with the error;
2. the search attributes ``IngestStatus=PENDING_FIX``, ``IngestFailedTask`` and
   ``IngestActivityId`` are upserted, so visibility finds it;
3. the workflow waits in ``wait_condition``: no worker slot, no timer; the wait
   survives worker restarts (it is only history).

An operator answers with a Workflow Update (validated first: a rejected update
writes no history and the caller gets the reason):

* ``fix``: a JSON merge patch to the payload; the handler runs again with it.
  While that retry is in flight the task is ``retrying`` and a second update is
  refused. If the retry fails for good again, the task pauses again.
* ``skip``: the task ends ``skipped``; the run goes on (and succeeds if nothing failed).
* ``abort``: the task fails as it would have without ``pause``; the run fails.

A task fixed again and again is a loop: before a retry (a safe boundary, every
handler finished) it continues as new when Temporal suggests it
(``workers.continuation``), carrying its fixes and the patched payload.

Every accepted action is written to ``task_fixes`` (workers.fix_audit) before
the update returns, and kept in the ``fix_state`` query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

    from schemas import search_attributes as sa
    from schemas.status import TaskStatus
    from schemas.workflow_io import (
        FixEntry,
        FixRequest,
        FixResult,
        FixState,
        RecordFixInput,
        TaskCarry,
        TaskInstanceInput,
        TaskStateResult,
    )
    from workers.continuation import continue_task, suggested
    from workers.errors import TaskAborted
    from workers.fix_audit import FixActivities
    from workers.merge_patch import PatchError, check_patch
    from workers.steps import db_step


def _refuse(message: str, kind: str) -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


PAUSE = "pause"  # the on_failure that makes a permanent failure wait for a fix


class PausableTask:
    """The pause-and-fix half of TaskInstanceWorkflow: the loop, its updates, its query."""

    def __init__(self) -> None:
        self._fix_status = "running"
        self._fix_error: str | None = None
        self._payload: dict[str, Any] = {}
        self._fixes: list[FixEntry] = []
        self._decision: FixEntry | None = None
        self._task: TaskInstanceInput | None = None

    async def _state(
        self, inp: TaskInstanceInput, status: str, error: str | None = None
    ) -> TaskStateResult:
        raise NotImplementedError  # TaskInstanceWorkflow's bookkeeping step

    async def _recoverable(
        self,
        inp: TaskInstanceInput,
        execute: Callable[[TaskInstanceInput], Awaitable[None]],
        describe: Callable[[BaseException], str],
    ) -> str:
        """Run ``execute`` until it succeeds (``"succeeded"``) or is skipped (``"skipped"``).

        Raises what ``execute`` raised when the task does not pause, and
        :class:`TaskAborted` when an operator aborts it.
        """
        self._task, self._payload = inp, dict(inp.spec.payload)
        if inp.continued is not None and inp.continued.fixes:  # a fix loop continued as new
            self._fixes, self._fix_status = list(inp.continued.fixes), "retrying"
        current, attempted = inp, False
        while True:
            if attempted and self._fixes and suggested():  # before a retry: a safe boundary
                await continue_task(current, self._carry)
            attempted = True
            try:
                await execute(current)
                break
            except ActivityError as exc:
                # A cancelled handler (its run cancelled or timed out) is no failure to fix.
                if inp.spec.on_failure != PAUSE or isinstance(exc.cause, asyncio.CancelledError):
                    raise
                if is_cancelled_exception(exc) and workflow.cancellation_reason() is not None:
                    raise
                decision = await self._pause(inp, describe(exc))
            if decision.action == "skip":
                await self._state(inp, TaskStatus.SKIPPED, decision.error)
                return await self._resolved(TaskStatus.SKIPPED)
            if decision.action == "abort":
                self._fix_status = "aborted"
                await self._resolved("aborted")
                raise TaskAborted(f"aborted by {decision.actor}: {decision.error}")
            self._fix_status = "retrying"
            current = replace(inp, spec=replace(inp.spec, payload=self._payload))
            await self._state(inp, TaskStatus.RUNNING)
            workflow.upsert_search_attributes([sa.STATUS.value_set(sa.RETRYING)])
        if self._fixes:
            workflow.upsert_search_attributes([sa.STATUS.value_set(sa.RESOLVED)])
        return await self._resolved(TaskStatus.SUCCEEDED)

    def _carry(self, runs: int) -> TaskCarry:
        return TaskCarry(continued_runs=runs, fixes=list(self._fixes))

    async def _pause(self, inp: TaskInstanceInput, error: str) -> FixEntry:
        workflow.logger.warning("task %s paused pending a fix: %s", inp.task_id, error)
        await self._state(inp, TaskStatus.PENDING_FIX, error)
        workflow.upsert_search_attributes(
            [
                sa.STATUS.value_set(sa.PENDING_FIX),
                sa.FAILED_TASK.value_set(inp.spec.task_type),
                sa.ACTIVITY_ID.value_set(inp.activity_id),
            ]
        )
        self._fix_status, self._fix_error, self._decision = "pending_fix", error, None
        await workflow.wait_condition(lambda: self._decision is not None)
        assert self._decision is not None
        return self._decision

    async def _resolved(self, status: str) -> str:
        if self._fix_status != "aborted":
            self._fix_status = status
        # Update handlers write their audit row before returning: let them finish.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return status

    # ------------------------------------------------------------- the updates

    @workflow.update(name="fix")
    async def fix(self, req: FixRequest) -> FixResult:
        patched = check_patch(req.patch, self._payload)
        return await self._accept("fix", req, patched)

    @fix.validator
    def _validate_fix(self, req: FixRequest) -> None:
        self._check_pending(req)
        try:
            check_patch(req.patch, self._payload)
        except PatchError as exc:
            raise _refuse(str(exc), "InvalidPatch") from None

    @workflow.update(name="skip")
    async def skip(self, req: FixRequest) -> FixResult:
        return await self._accept("skip", req, None)

    @skip.validator
    def _validate_skip(self, req: FixRequest) -> None:
        self._check_pending(req)

    @workflow.update(name="abort")
    async def abort(self, req: FixRequest) -> FixResult:
        return await self._accept("abort", req, None)

    @abort.validator
    def _validate_abort(self, req: FixRequest) -> None:
        self._check_pending(req)

    @workflow.query(name="fix_state")
    def fix_state(self) -> FixState:
        return FixState(self._fix_status, self._fix_error, self._payload, list(self._fixes))

    def _check_pending(self, req: FixRequest) -> None:
        if self._fix_status == "retrying":
            raise _refuse("a fix is already being retried: wait for its outcome", "NotPendingFix")
        if self._fix_status != "pending_fix":
            status = self._fix_status
            raise _refuse(f"the task is not pending_fix (it is {status})", "NotPendingFix")
        if not isinstance(req.actor, str) or not req.actor.strip():
            raise _refuse("actor must be a non-empty string", "InvalidActor")

    async def _accept(
        self, action: str, req: FixRequest, patched: dict[str, Any] | None
    ) -> FixResult:
        assert self._task is not None and self._fix_error is not None
        self._fix_status = "deciding"  # from here on, further updates are refused
        entry = FixEntry(
            seq=len(self._fixes) + 1,
            action=action,
            actor=req.actor.strip(),
            error=self._fix_error,
            at=workflow.now().isoformat(),
            patch=req.patch if action == "fix" else None,
            note=req.note,
        )
        self._fixes.append(entry)
        task = self._task
        try:
            await db_step(
                FixActivities.record_fix,
                RecordFixInput(task.task_id, task.run_id, task.spec.task_type, entry, patched),
            )
        except ApplicationError:
            # Refused for good (workers.data_errors: e.g. a patched payload that jsonb
            # cannot hold): the action is not taken, the task stays pending_fix, and the
            # operator's update fails with the reason instead of every later one being
            # refused as "deciding".
            self._fixes.pop()
            self._fix_status = "pending_fix"
            raise
        if patched is not None:
            self._payload = patched
        self._decision = entry
        return FixResult(task.task_id, action, entry.seq)
