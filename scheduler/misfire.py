"""What a misfire policy does with a gap: a pure decision, tested on its own.

A *gap* is the list of nominal times strictly between the last nominal time
that ran and the current fire ``T`` that never got a run: the schedule was
paused, or the Temporal server was down past the catch-up window, or a SKIP
overlap dropped fires while workers were down. The dispatcher finds it at the
first *current* fire after it (see :mod:`scheduler.dispatcher`) and applies:

* ``skip``: the missed times are discarded; ``T`` runs with its normal window
  ``[previous nominal, T]``.
* ``catchup``: the latest ``catchup_limit`` missed times are replayed through
  ``ScheduleHandle.backfill`` (the earliest are dropped when the limit cuts:
  the most recent data is usually what matters); ``T`` runs normally.
* ``compress``: nothing is replayed; ``T`` runs once with the widened window
  ``[last nominal time that ran, T]`` covering every missed interval.

Every missed time counts once in ``pipeline_misfires_total{policy}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Decision:
    window_start: datetime
    window_end: datetime
    replay: list[datetime] = field(default_factory=list)  # nominal times to backfill
    dropped: list[datetime] = field(default_factory=list)  # missed and never run
    misfires: int = 0


def decide(
    policy: str,
    scheduled_for: datetime,
    previous_nominal: datetime,
    last_ran: datetime | None,
    missed: list[datetime],
    missed_total: int,
    catchup_limit: int,
) -> Decision:
    """The window of the run for ``scheduled_for`` and what to do with ``missed``.

    ``missed`` holds the latest missed times (ascending), ``missed_total`` how
    many there were in all (it can exceed ``len(missed)`` for huge gaps).
    """
    if not missed_total:
        return Decision(previous_nominal, scheduled_for)
    if policy == "skip":
        return Decision(
            previous_nominal, scheduled_for, dropped=list(missed), misfires=missed_total
        )
    if policy == "catchup":
        keep = missed[-catchup_limit:]
        return Decision(
            previous_nominal,
            scheduled_for,
            replay=keep,
            dropped=missed[: len(missed) - len(keep)],
            misfires=missed_total,
        )
    if policy == "compress":
        start = last_ran if last_ran is not None else previous_nominal
        return Decision(start, scheduled_for, dropped=list(missed), misfires=missed_total)
    raise ValueError(f"unknown misfire policy {policy!r}")
