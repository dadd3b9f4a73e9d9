"""Stand-ins for the workers' activities, under their production names: they record
what the workflow asked for and answer as the database would for a fresh task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from schemas.approval_io import ApprovalNoticeInput, RecordApprovalInput
from schemas.workflow_io import (
    LocalTaskResult,
    PermitEndedInput,
    RecordFixInput,
    RunHandlerInput,
    TaskStateInput,
    TaskStateResult,
)


@dataclass
class Fakes:
    # how each handler attempt ends: an exception to raise, or None (success)
    handler_outcomes: list[BaseException | None] = field(default_factory=list)
    states: list[str] = field(default_factory=list)  # set_task_state's statuses, in order
    notices: list[str] = field(default_factory=list)  # approval notice kinds, in order
    handler_payloads: list[dict[str, Any]] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # record_fix actions
    permits_ended: list[str] = field(default_factory=list)  # permit_ended outcomes
    # what each run_local_task step's claim answers (default: claimed, running)
    local_claims: list[TaskStateResult | None] = field(default_factory=list)
    local_steps: int = 0  # run_local_task calls

    def all(self) -> list[Callable[..., Any]]:
        return [self.set_task_state, self.run_handler, self.run_local_task, self.record_approval,
                self.approval_notice, self.record_fix, self.permit_ended]  # fmt: skip

    @activity.defn(name="set_task_state")
    async def set_task_state(self, inp: TaskStateInput) -> TaskStateResult:
        self.states.append(inp.status)
        return TaskStateResult(claimed=True, status=inp.status)

    @activity.defn(name="run_handler")
    async def run_handler(self, inp: RunHandlerInput) -> bool | None:
        self.handler_payloads.append(inp.spec.payload)
        outcome = self.handler_outcomes.pop(0) if self.handler_outcomes else None
        if outcome is not None:
            raise outcome
        return None

    @activity.defn(name="run_local_task")
    async def run_local_task(self, inp: RunHandlerInput) -> LocalTaskResult:
        self.local_steps += 1
        default = TaskStateResult(claimed=True, status="running")
        claim = self.local_claims.pop(0) if self.local_claims else default
        if claim is None or not claim.claimed or claim.status != "running":
            return LocalTaskResult(claim)
        await self.run_handler(inp)
        return LocalTaskResult(claim, finished=True)

    @activity.defn(name="record_approval")
    async def record_approval(self, inp: RecordApprovalInput) -> int:
        return len(inp.entries)

    @activity.defn(name="approval_notice")
    async def approval_notice(self, inp: ApprovalNoticeInput) -> None:
        self.notices.append(inp.kind)

    @activity.defn(name="record_fix")
    async def record_fix(self, inp: RecordFixInput) -> bool:
        self.fixes.append(inp.entry.action)
        return True

    @activity.defn(name="permit_ended")
    async def permit_ended(self, inp: PermitEndedInput) -> None:
        self.permits_ended.append(inp.outcome)


def permanent(message: str) -> ApplicationError:
    """A handler failure that retrying cannot fix."""
    return ApplicationError(message, type="Broken", non_retryable=True)
