"""Inputs and outputs of the dispatcher workflow and its activity (frozen dataclasses).

Kept here, not in ``schemas.workflow_io``, because only the scheduler uses them.
Times are ISO-8601 strings in UTC, like every other workflow input.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CronFireInput:
    """The schedule action's argument. No time: the nominal time comes from Temporal.

    ``resumed_at`` is set only by ``ingest schedules resume --now``, which starts the
    dispatcher itself: the misfire policy is then applied at that time.
    """

    activity_id: str
    resumed_at: str | None = None


@dataclass(frozen=True)
class FireInput:
    activity_id: str
    fired_at: str  # TemporalScheduledStartTime (nominal), or the trigger time of a manual fire
    started_at: str  # when Temporal started the dispatcher (workflow start time)
    resume: bool = False  # `schedules resume --now`: apply the misfire policy now


@dataclass(frozen=True)
class FireResult:
    # "started" | "duplicate" | "unknown_activity" | "disabled", and at resume:
    # "skipped" (policy skip dropped the gap) | "nothing_missed"
    outcome: str
    workflow_id: str | None = None
    scheduled_for: str | None = None
    context_window_start: str | None = None
    context_window_end: str | None = None
    replayed: list[str] = field(default_factory=list)
    misfires: int = 0
