"""The wait of an approval task, run inside ``TaskInstanceWorkflow`` (workflow code).

No activity blocks on a person: the workflow waits with ``wait_condition``, which
holds no worker slot, and each deadline is the durable timer of a
``wait_condition(timeout=...)``, so it survives worker restarts.

* **Request:** the status becomes ``waiting`` with the SLA deadline, a
  ``requested`` audit entry is written and an ``approval.requested`` notice sent.
* **Reminders:** a workflow task (``asyncio.create_task``) waits until the next
  reminder is due and sends ``approval.reminder`` notices through an activity.
  It is stopped (a flag its wait watches; never ``cancel()``, which would fail an
  activity in flight) as soon as the phase changes (a decision, escalation,
  continue-as-new), and it checks the phase again after its timer fires, so no
  reminder goes out after a decision. Reminders are due at fixed times
  (``waiting_since + k * remind_every``), carried across continue-as-new.
* **Closing:** every path the workflow runs closes the approvals row: a decision,
  a deadline, a cancellation (``cancelled``) or a failure of the wait (``failed``);
  a termination runs no workflow code, so the approvals part's sweep closes those
  (``sweep.py``).
* **Escalation:** at the SLA deadline the status becomes ``escalated``, an
  ``approval.escalated`` notice goes to ``escalate_to`` (or the approvers when
  there is none), and the escalation contact may decide too, until
  ``deadline + escalation_sla_seconds``; then the task is auto-rejected.
* **Decisions** arrive as the ``decide`` update (see ``rules`` for who may send
  what); ``request_changes`` waits for a ``resubmit`` update for up to
  ``resubmission_timeout_seconds`` (else ``expired``), which starts a new round.
* **Audit:** every step appends an :class:`AuditEntry` (queryable) and writes it to
  PostgreSQL through the ``record_approval`` local activity; an update returns only
  once its entry is written.
* **Continue-as-new:** between two waits, when the server suggests it and this
  run has made progress, the task continues as new carrying its state
  (``workers/continuation.py``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import CancelledError

    from pipeline.retry import UNTIL_DONE
    from schemas.approval_io import (
        APPROVED,
        AUTO_REJECTED,
        CANCELLED,
        CHANGES_REQUESTED,
        ESCALATED,
        EXPIRED,
        FAILED,
        OPEN,
        PENDING,
        REQUEST_CHANGES,
        WAITING,
        ApprovalDecision,
        ApprovalNoticeInput,
        ApprovalResubmission,
        ApprovalState,
        ApprovalUpdateResult,
        AuditEntry,
        RecordApprovalInput,
    )
    from schemas.workflow_io import TaskCarry, TaskInstanceInput
    from workers.approvals import rules
    from workers.approvals.activities import ApprovalActivities
    from workers.approvals.config import ApprovalConfig, approval_config
    from workers.continuation import continue_task, continued_runs, suggested
    from workers.errors import ApprovalRejected
    from workers.steps import db_step, describe
    from workers.tracing_waits import APPROVAL, waited

# Notices retry until sent (Kafka down delays them) or no longer wanted (cancelled).
_NOTICE_RETRY = UNTIL_DONE
# A Kafka send takes milliseconds; a notice lost with a dead worker is retried after this.
_NOTICE_TIMEOUT = timedelta(seconds=10)
# Reminder entries a continued run carries in its audit trail (all others are carried).
CARRIED_REMINDERS = 10


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _carried(audit: list[AuditEntry]) -> list[AuditEntry]:
    """The trail a continued run carries: every entry but reminders, and the last
    ``CARRIED_REMINDERS`` reminders. A long wait's reminders would otherwise grow the
    carried state (and the next run's first event) without bound, however often it
    continues as new; every entry is in ``approval_events`` already (a run continues only
    once all are written), and ``reminders_sent`` keeps the count."""
    reminders = [i for i, e in enumerate(audit) if e.kind == "reminder"]
    dropped = set(reminders[:-CARRIED_REMINDERS])
    return [e for i, e in enumerate(audit) if i not in dropped]


class ApprovalFlow:
    """The state and the wait of one approval task; the workflow's handlers delegate here."""

    def __init__(self, inp: TaskInstanceInput) -> None:
        self._inp = inp
        self._cfg: ApprovalConfig | None = None
        carried = inp.continued.approval if inp.continued is not None else None
        s = carried or ApprovalState(inp.task_id, PENDING, 1, dict(inp.spec.payload), [], [])
        self._status = s.status
        self._round = s.round
        self._payload = s.payload
        self._approvers = list(s.approvers)
        self._escalate_to = list(s.escalate_to)
        self._waiting_since = _dt(s.waiting_since)
        self._deadline = _dt(s.deadline)
        self._next_reminder = _dt(s.next_reminder_at)
        self._reminders = s.reminders_sent
        self._escalations = s.escalations
        self._resubmissions = s.resubmissions
        self._audit = list(s.audit)
        self._persisted = len(self._audit)  # a run continues only once all was written
        self._phase = 0  # bumped on every status change
        self._reminder_gen = 0  # bumped to stop the reminder task
        self._progress = False  # this run appended to the audit trail
        self._write = asyncio.Lock()
        self._outbox: list[asyncio.Task[None]] = []  # notices sent without waiting

    # --- queries and updates (the workflow's handlers call these) --------------------

    def snapshot(self) -> ApprovalState:
        return ApprovalState(
            task_id=self._inp.task_id,
            status=self._status,
            round=self._round,
            payload=self._payload,
            approvers=self._approvers,
            escalate_to=self._escalate_to,
            waiting_since=_iso(self._waiting_since),
            deadline=_iso(self._deadline),
            next_reminder_at=_iso(self._next_reminder),
            reminders_sent=self._reminders,
            escalations=self._escalations,
            resubmissions=self._resubmissions,
            continued_runs=continued_runs(self._inp),
            audit=list(self._audit),
        )

    def check_decision(self, d: ApprovalDecision) -> None:
        rules.check_decision(self._inp.task_id, self._status, self._approvers, self._escalate_to, d)

    async def decide(self, d: ApprovalDecision) -> ApprovalUpdateResult:
        now = workflow.now()
        entry = self._append("decision", actor=d.by, decision=d.decision, reason=d.reason,
                             waited_seconds=self._waited(now))  # fmt: skip
        if d.decision == REQUEST_CHANGES:
            timeout = timedelta(seconds=self._config().resubmission_timeout_seconds)
            self._enter(CHANGES_REQUESTED, now + timeout)
        else:
            self._enter(rules.STATUS_OF_DECISION[d.decision], None)
        await self._flush()
        return ApprovalUpdateResult(self._inp.task_id, self._status, entry.seq)

    def check_resubmission(self, r: ApprovalResubmission) -> None:
        rules.check_resubmission(self._inp.task_id, self._status, r)

    async def resubmit(self, r: ApprovalResubmission) -> ApprovalUpdateResult:
        self._payload = rules.resubmitted_payload(self._payload, r.payload)
        self._round += 1
        self._resubmissions += 1
        entry = self._append("resubmitted", actor=r.by, reason=r.note, payload=r.payload)
        self._start_wait(workflow.now())
        await self._flush()
        return ApprovalUpdateResult(self._inp.task_id, self._status, entry.seq)

    # --- the wait (TaskInstanceWorkflow.run calls this) ----------------------------

    async def run(self) -> None:
        """Return once approved; raise :class:`ApprovalRejected` otherwise.

        A bad config raises TaskConfigError naming the field (the task fails). A wait
        that is cancelled or fails closes the approval (``cancelled``, ``failed``) before
        the error goes on, so no row stays open after its workflow closed.
        """
        cfg = self._config()
        try:
            await self._wait(cfg)
        except asyncio.CancelledError:
            await self._close_without_decision(CANCELLED, "the task was cancelled")
            raise
        except Exception as exc:
            # An activity cancelled with the workflow (ActivityError from CancelledError).
            cancelled = isinstance(exc.__cause__, CancelledError)
            await self._close_without_decision(CANCELLED if cancelled else FAILED, describe(exc))
            raise
        if self._status != APPROVED:
            raise ApprovalRejected(self._why_not())

    async def _wait(self, cfg: ApprovalConfig) -> None:
        if self._status == PENDING:
            self._approvers, self._escalate_to = list(cfg.approvers), list(cfg.escalate_to)
            self._start_wait(workflow.now())
            self._append("requested")
            await self._flush()
            self._send_soon(self._notice("approval.requested", self._approvers))
        while self._status in OPEN:
            await self._wait_phase()
            if self._status in OPEN and self._progress and suggested():
                await self._drain_outbox()
                await continue_task(self._inp, self._carry)
        await self._drain_outbox()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._flush()

    async def _close_without_decision(self, status: str, reason: str) -> None:
        """Close a wait that ends without a decision; its audit entry says why."""
        if self._status not in OPEN or not self._audit:  # closed, or never written
            return
        workflow.logger.warning("approval %s %s: %s", self._inp.task_id, status, reason)
        self._enter(status, None)
        self._append(status, reason=reason, waited_seconds=self._waited(workflow.now()))
        await self._flush()

    async def _wait_phase(self) -> None:
        """Wait until the phase changes, continue-as-new is due, or the deadline passes."""
        phase = self._phase
        reminders = None
        if self._next_reminder is not None:
            reminders = asyncio.create_task(self._remind(phase, self._reminder_gen))
        assert self._deadline is not None
        remaining = (self._deadline - workflow.now()).total_seconds()
        timed_out = remaining <= 0
        try:
            if not timed_out:
                # A reminder task that failed (its notice refused for good) ends the
                # wait at once: the task fails, rather than reminders stopping unseen.
                await workflow.wait_condition(
                    lambda: (
                        self._phase != phase
                        or (self._progress and suggested())
                        or (reminders is not None and reminders.done())
                    ),
                    timeout=remaining,
                )
        except TimeoutError:
            timed_out = True
        except GeneratorExit:
            raise  # evicted from the worker's cache: no workflow call can run now
        except BaseException:
            await self._stop_reminders(reminders)
            raise
        await self._stop_reminders(reminders)
        if timed_out and self._phase == phase:
            await self._deadline_passed()
        await self._flush()

    async def _deadline_passed(self) -> None:
        cfg = self._config()
        assert self._deadline is not None
        if self._status == WAITING:
            self._escalations += 1
            escalation_deadline = self._deadline + timedelta(seconds=cfg.escalation_seconds)
            self._enter(ESCALATED, escalation_deadline, keep_reminders=True)
            self._append("escalated")
            await self._flush()
            self._send_soon(
                self._notice("approval.escalated", self._escalate_to or self._approvers)
            )
        elif self._status == ESCALATED:
            sla = cfg.sla_seconds + cfg.escalation_seconds
            reason = f"no decision within {sla:g} s (SLA and escalation SLA)"
            waited = self._waited(workflow.now())
            self._enter(AUTO_REJECTED, None)
            self._append("auto_rejected", reason=reason, waited_seconds=waited)
        elif self._status == CHANGES_REQUESTED:
            reason = f"no resubmission within {cfg.resubmission_timeout_seconds:g} s"
            self._enter(EXPIRED, None)
            self._append("expired", reason=reason, waited_seconds=self._waited(workflow.now()))

    # --- reminders -------------------------------------------------------------------

    async def _remind(self, phase: int, gen: int) -> None:
        every = timedelta(seconds=self._config().remind_every_seconds or 0)

        def stopped() -> bool:
            return self._phase != phase or self._reminder_gen != gen

        while self._next_reminder is not None and not stopped():
            delay = (self._next_reminder - workflow.now()).total_seconds()
            if delay > 0:
                # Stopped by a flag, never cancelled: a cancelled activity (the notice,
                # or the audit write after it) raises ActivityError, which would fail
                # the task. The timer and a decision can land in one workflow task: the
                # flag is looked at again after the timer.
                try:
                    await workflow.wait_condition(stopped, timeout=delay)
                except TimeoutError:
                    pass
                if stopped():
                    return
            due, self._next_reminder = self._next_reminder, self._next_reminder + every
            self._reminders += 1
            to = self._approvers + (self._escalate_to if self._status == ESCALATED else [])
            # Recorded when it fires (before any decision that arrives while it is sent).
            self._append("reminder")
            await self._send(
                self._notice("approval.reminder", to, reminder=self._reminders, due=due)
            )
            await self._flush()

    async def _stop_reminders(self, task: asyncio.Task[None] | None) -> None:
        """Stop the reminder task: its wait ends at once; a reminder already being sent
        (it was due before the phase changed) is sent and written first."""
        if task is None:
            return
        self._reminder_gen += 1
        await workflow.wait([task])
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    # --- helpers ---------------------------------------------------------------------

    def _config(self) -> ApprovalConfig:
        """The parsed config (TaskConfigError names a bad field; then the task fails)."""
        if self._cfg is None:
            self._cfg = approval_config(self._inp.spec.config)
        return self._cfg

    def _start_wait(self, now: datetime) -> None:
        cfg = self._config()
        self._waiting_since = now
        self._enter(WAITING, now + timedelta(seconds=cfg.sla_seconds))
        every = cfg.remind_every_seconds
        self._next_reminder = now + timedelta(seconds=every) if every else None

    def _enter(self, status: str, deadline: datetime | None, keep_reminders: bool = False) -> None:
        self._status, self._deadline = status, deadline
        if not keep_reminders:
            self._next_reminder = None
        self._phase += 1

    def _waited(self, now: datetime) -> float | None:
        if self._waiting_since is None:
            return None
        return (now - self._waiting_since).total_seconds()

    def _append(self, kind: str, **fields: Any) -> AuditEntry:
        seq = self._audit[-1].seq + 1 if self._audit else 0  # a carried trail has gaps
        entry = AuditEntry(seq, workflow.now().isoformat(), kind, self._round, **fields)
        self._audit.append(entry)
        self._progress = True
        if entry.waited_seconds is not None:  # a wait ended: a decision, or without one
            waited(APPROVAL, entry.waited_seconds, approval_id=self._inp.task_id, outcome=kind,
                   decision=entry.decision, decided_by=entry.actor,
                   round=self._round)  # fmt: skip
        return entry

    def _why_not(self) -> str:
        last = next((e for e in reversed(self._audit) if e.kind != "reminder"), None)
        if last is None:
            return f"approval {self._status}"
        by = f" by {last.actor}" if last.actor else ""
        return f"approval {self._status}{by}: {last.reason or 'no reason given'}"

    def _carry(self, runs: int) -> TaskCarry:
        state = replace(self.snapshot(), continued_runs=runs, audit=_carried(self._audit))
        return TaskCarry(continued_runs=runs, approval=state)

    async def _flush(self) -> None:
        """Write the audit entries not yet written (one local activity, serialised)."""
        async with self._write:
            if self._persisted >= len(self._audit):
                return
            entries = self._audit[self._persisted :]
            first = self._audit[0].at
            await db_step(
                ApprovalActivities.record,
                RecordApprovalInput(
                    task_id=self._inp.task_id,
                    run_id=self._inp.run_id,
                    activity_id=self._inp.activity_id,
                    status=self._status,
                    round=self._round,
                    approvers=self._approvers,
                    escalate_to=self._escalate_to,
                    deadline=_iso(self._deadline),
                    payload=self._payload,
                    requested_at=first,
                    entries=entries,
                ),
            )
            self._persisted += len(entries)

    def _send_soon(self, notice: ApprovalNoticeInput) -> None:
        """Send without holding up the wait: the deadline timer starts at once, even when
        the notice is lost with a dead worker and waits out its timeout to be retried."""
        self._outbox.append(asyncio.create_task(self._send(notice)))

    async def _drain_outbox(self) -> None:
        """Wait for the notices sent soon (before the task closes or continues as new)."""
        while self._outbox:
            sending, self._outbox = self._outbox, []
            await asyncio.gather(*sending)

    def _notice(self, kind: str, to: list[str], **extra: Any) -> ApprovalNoticeInput:
        """A notice with the state as it is now."""
        body = {
            "to": to,
            "status": self._status,
            "round": self._round,
            "deadline": _iso(self._deadline),
            "payload": self._payload,
            **{k: _iso(v) if isinstance(v, datetime) else v for k, v in extra.items()},
        }
        inp = self._inp
        topic = self._config().topic
        return ApprovalNoticeInput(inp.task_id, inp.run_id, inp.activity_id, kind, body, topic)

    async def _send(self, notice: ApprovalNoticeInput) -> None:
        await workflow.execute_activity_method(
            ApprovalActivities.notice,
            notice,
            start_to_close_timeout=_NOTICE_TIMEOUT,
            retry_policy=_NOTICE_RETRY,
        )
