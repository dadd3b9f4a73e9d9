"""Retrying, written once: the service loops' capped backoff, and the workflows' RetryPolicy.

* :func:`backoff`: the delays between attempts of a loop that retries a transient
  failure until it succeeds or the process stops (ingress delivery, the router's
  ledger and commits, the starter): 0.2 s doubling up to 5 s. Short enough that a
  broker or Temporal back from a blip is noticed at once, capped so a long outage
  costs one attempt per 5 s per loop, and the first attempt after it comes within 5 s
  (7.5 with the starter's jitter): each second a loop sleeps past the outage's end
  is backlog the pipeline drains later (the soak's recovery, docs/soak.md). A delay
  spaces the starts of attempts (:func:`since_began`): after an attempt that hung, the
  next one starts at once.
* :data:`UNTIL_DONE`: the ``RetryPolicy`` of steps that must not fail for an outage
  (bookkeeping in PostgreSQL, notices to Kafka, the cron fire): no attempt limit,
  1 s doubling up to 5 s, the loops' cap, so a run resumes within 5 s of its
  dependency's return (30 s, then 10, left runs waiting that long after an outage, while
  the router had started the backlog's runs already). The bookkeeping steps are local
  activities, retried inside the worker, so an attempt every 5 s per waiting step costs
  the server nothing; the few regular ones (a notice, the cron fire) one dispatch each.
  Workflow code: a constant, nothing else here runs.
* :data:`RETRYING`: which of the loops are failing right now, for ``/readyz``.
* :func:`until_done`: such a loop written once (the router's lookups and flow calls, the
  windows' calls): retry what ``retriable`` accepts, record it in :data:`RETRYING`, stop
  with :class:`ShutdownRequested` when the process stops (the starter's too, its delays
  :func:`jittered`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from temporalio.common import RetryPolicy

from schemas.errors import IngestError

log = logging.getLogger(__name__)
T = TypeVar("T")

BACKOFF_INITIAL = 0.2
BACKOFF_MAX = 5.0

UNTIL_DONE = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=BACKOFF_MAX),
)


def backoff(initial: float = BACKOFF_INITIAL, maximum: float = BACKOFF_MAX) -> Iterator[float]:
    """``initial``, then each delay doubled, capped at ``maximum`` (endless)."""
    delay = initial
    while True:
        yield delay
        delay = min(delay * 2, maximum)


def since_began(delay: float, took: float) -> float:
    """What is left of ``delay`` once an attempt that failed after ``took`` s: a delay
    spaces the *starts* of attempts. An attempt that hung until its bound (a statement on
    a half-open link: ``DATABASE_COMMAND_TIMEOUT`` and asyncpg's cancel, about 10 s) has
    waited out the delay already, and the link healing is what ends it (the proxy or the
    peer drops the connection): waiting the whole delay after that is time the pipeline
    sleeps past the outage's end, backlog it drains later (docs/soak.md). Attempts still
    start at most once per delay, so a dependency that fails fast sees the same rate."""
    return max(0.0, delay - took)


def jittered(delays: Iterator[float]) -> Iterator[float]:
    """Each of ``delays`` scaled by a random factor in [0.5, 1.5): the loops of many
    processes that failed together (every router's starts after a Temporal outage) do not
    retry in step."""
    for delay in delays:
        yield delay * (0.5 + random.random())


@dataclass
class _Failing:
    what: str
    since: float
    error: str


# A call of a retry loop in flight this long counts as failing even before it fails: a
# query on a half-open link ends only after DATABASE_COMMAND_TIMEOUT and asyncpg's
# cancel request (about twice the bound), and /readyz should not wait for that. The
# loops' calls take milliseconds when their dependency answers.
STUCK_SECONDS = 10.0


class Retrying:
    """The retry loops of this process waiting out a failure right now.

    A loop reports each failed attempt (:meth:`failed`) and clears itself once an attempt
    succeeds or it gives up (:meth:`cleared`); a loop in one block (:meth:`loop`) also
    counts while it has been running longer than :data:`STUCK_SECONDS` (a call that hangs
    has not failed yet). ``/readyz`` answers 503 with :meth:`why_not_ready` while any loop
    fails (``pipeline.runtime.serve_http``), so a router whose PostgreSQL or Temporal does
    not answer says so instead of staying ready. A process has one registry,
    :data:`RETRYING`: every loop in it counts.
    """

    def __init__(self) -> None:
        self._failing: dict[object, _Failing] = {}
        self._running: dict[object, tuple[str, float]] = {}

    def failed(self, key: object, what: str, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"[:200]
        if (known := self._failing.get(key)) is not None:
            known.error = error
        else:
            since = self._running.get(key, (what, time.monotonic()))[1]
            self._failing[key] = _Failing(what, since, error)

    def cleared(self, key: object) -> None:
        self._failing.pop(key, None)

    @contextmanager
    def loop(self, what: str) -> Iterator[Callable[[BaseException], None]]:
        """For a loop in one block: yields ``failed(exc)``; cleared when the block ends."""
        key = object()
        self._running[key] = (what, time.monotonic())
        try:
            yield lambda exc: self.failed(key, what, exc)
        finally:
            self.cleared(key)
            del self._running[key]

    def _current(self) -> list[_Failing]:
        """The failing loops, and those running for longer than STUCK_SECONDS."""
        now = time.monotonic()
        stuck = [
            _Failing(what, since, f"no answer for {now - since:.0f}s")
            for key, (what, since) in self._running.items()
            if key not in self._failing and now - since > STUCK_SECONDS
        ]
        return [*self._failing.values(), *stuck]

    def oldest_age(self) -> float:
        """Seconds the oldest failing loop has failed; 0 when none fails (the gauge
        ``pipeline_dependency_failing_seconds``)."""
        current = self._current()
        if not current:
            return 0.0
        return time.monotonic() - min(f.since for f in current)

    def why_not_ready(self) -> str | None:
        """The longest-failing loop, its age and last error; None when none fails."""
        current = self._current()
        if not current:
            return None
        oldest = min(current, key=lambda f: f.since)
        more = len(current) - 1
        return (
            f"{oldest.what} retrying for {time.monotonic() - oldest.since:.0f}s"
            f" ({oldest.error})" + (f" and {more} more" if more else "")
        )


RETRYING = Retrying()


class ShutdownRequested(IngestError):
    """Stopped retrying because the process is shutting down; the offset stays uncommitted."""


async def until_done(
    what: str,
    fn: Callable[[], Awaitable[T]],
    *,
    retriable: Callable[[Exception], bool],
    stopping: Callable[[], bool],
    delays: Iterator[float] | None = None,
    subject: str | None = None,
) -> T:
    """``fn()`` until it succeeds. A failure ``retriable`` accepts is recorded in
    :data:`RETRYING` (``/readyz`` answers 503 naming ``what``), logged and waited out by
    ``delays`` (:func:`backoff`'s by default); any other is raised; once ``stopping()``
    holds, a failure raises :class:`ShutdownRequested` instead of waiting. ``subject``
    names the one thing retried in the log and in ``ShutdownRequested`` (``what`` by
    default: ``what`` is the loop's kind, one line of ``/readyz`` for all of them)."""
    delays = delays or backoff()
    subject = subject or what
    with RETRYING.loop(what) as failed:
        while True:
            began = time.monotonic()
            try:
                return await fn()
            except Exception as exc:
                if not retriable(exc):
                    raise
                failed(exc)
                if stopping():
                    raise ShutdownRequested(subject) from None
                wait = since_began(next(delays), time.monotonic() - began)
                log.warning("%s failed (%s), retrying in %.1fs", subject, exc, wait)
                await asyncio.sleep(wait)
