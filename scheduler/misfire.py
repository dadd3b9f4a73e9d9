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

``ingest schedules resume --now`` applies the policy at resume time instead
(:func:`decide_at_resume`): the newest missed time ``M`` is fired late, now, by a
dispatcher with the id Temporal would have given ``M``'s own fire, so the next
regular fire finds ``M`` covered and sees no gap left.
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
    run: bool = True  # start the run of window_end (False: skip at resume)


@dataclass(frozen=True)
class Gap:
    """What came before a fire's nominal time.

    ``previous_nominal`` is the nominal time just before it (where its window starts
    when nothing was missed), ``last_ran`` the last nominal time that ran, ``missed``
    the latest of the times missed in between (ascending) and ``total`` how many
    were missed in all (it can exceed ``len(missed)`` for huge gaps).
    """

    previous_nominal: datetime
    last_ran: datetime | None
    missed: list[datetime]
    total: int


def decide(policy: str, scheduled_for: datetime, gap: Gap, catchup_limit: int) -> Decision:
    """The window of the run for ``scheduled_for`` and what to do with ``gap``."""
    if not gap.total:
        return Decision(gap.previous_nominal, scheduled_for)
    return _apply(policy, scheduled_for, gap, gap.total, catchup_limit)


def _apply(policy: str, end: datetime, gap: Gap, misfires: int, replay_at_most: int) -> Decision:
    """The run of ``end`` and what happens to ``gap.missed`` under ``policy``."""
    missed = gap.missed
    if policy == "skip":
        return Decision(gap.previous_nominal, end, dropped=list(missed), misfires=misfires)
    if policy == "catchup":
        keep = missed[max(0, len(missed) - replay_at_most) :] if replay_at_most > 0 else []
        return Decision(
            gap.previous_nominal,
            end,
            replay=keep,
            dropped=missed[: len(missed) - len(keep)],
            misfires=misfires,
        )
    if policy == "compress":
        start = gap.last_ran if gap.last_ran is not None else gap.previous_nominal
        return Decision(start, end, dropped=list(missed), misfires=misfires)
    raise ValueError(f"unknown misfire policy {policy!r}")


def decide_at_resume(policy: str, latest: datetime, gap: Gap, catchup_limit: int) -> Decision:
    """What resuming now does with a gap that ends at ``latest`` (itself missed).

    ``gap`` holds the missed times *before* ``latest``, as in :func:`decide`; the
    whole gap is those plus ``latest``. No regular fire comes first:

    * ``skip``: every missed time is dropped; nothing runs;
    * ``catchup``: the latest ``catchup_limit`` missed times run: ``latest`` itself,
      and the ones before it through backfill;
    * ``compress``: ``latest`` runs once with the window ``[last that ran, latest]``.
    """
    total = gap.total + 1
    if policy == "skip":
        return Decision(
            gap.previous_nominal, latest, dropped=[*gap.missed, latest], misfires=total, run=False
        )
    # ``latest`` runs itself, so catch-up replays one fewer of the times before it.
    return _apply(policy, latest, gap, total, catchup_limit - 1)
