"""Replaying a topic range through the live router's code path.

Why a separate reader and not "reset the router's group": a replay must never
move the live group's offsets (the live router keeps running during an
incident review) and must stop at a known end. So :class:`Replayer` assigns
partitions manually with no group at all, seeks by offset or
``offsets_for_times``, and reads up to the end offsets captured when it
started (or ``--to-time``). Every message goes through
:class:`router.routing.Routing` exactly as in the live router: one ledger
look-up per batch, REJECT_DUPLICATE starts, the same DLQ. So a replay starts
only what never ran: the ledger answers for anything routed before (even after
Temporal forgot it past its retention), Temporal for anything started but not
yet in the ledger.

DLQ re-drive (``ingest replay --dlq``) lives in :mod:`replay.dlq`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline import kafka
from replay.session import (
    STALL_SECONDS,
    Ranges,
    ReplayError,
    ReplayReport,
    SessionRunner,
    topic_partitions,
    unfinished,
    wait_for_stops,
)
from router.budget import InFlightBytes
from router.routing import Routing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplayRange:
    """What to replay: one topic, a start (offset or time), an optional end time."""

    topic: str
    from_offset: int | None = None
    from_time: datetime | None = None
    to_time: datetime | None = None
    partitions: tuple[int, ...] | None = None


def _ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ReplayError(f"{dt.isoformat()} has no time zone; give one (e.g. Z or +00:00)")
    return int(dt.timestamp() * 1000)


async def plan_ranges(consumer: AIOKafkaConsumer, rng: ReplayRange) -> Ranges:
    """Per partition ``(start, stop)``: stop is the end offset now, or the first offset at
    or after ``to_time``; start is ``from_offset`` (clamped to the log start) or the first
    offset at or after ``from_time``."""
    parts = await topic_partitions(consumer, rng.topic)
    if rng.partitions is not None:
        unknown = sorted(set(rng.partitions) - set(parts))
        if unknown:
            raise ReplayError(f"topic {rng.topic!r} has partitions {parts}, not {unknown}")
        parts = sorted(set(rng.partitions))
    tps = [TopicPartition(rng.topic, p) for p in parts]
    begin = await consumer.beginning_offsets(tps)
    end = await consumer.end_offsets(tps)
    if rng.from_time is not None:
        ms = _ms(rng.from_time)
        found = await consumer.offsets_for_times({tp: ms for tp in tps})
        start = {tp: found[tp].offset if found.get(tp) else end[tp] for tp in tps}
    else:
        first = rng.from_offset or 0
        start = {tp: max(first, begin[tp]) for tp in tps}
    stop = dict(end)
    if rng.to_time is not None:
        ms = _ms(rng.to_time)
        found = await consumer.offsets_for_times({tp: ms for tp in tps})
        stop = {tp: min(end[tp], found[tp].offset) if found.get(tp) else end[tp] for tp in tps}
    return {tp: (start[tp], max(start[tp], stop[tp])) for tp in tps}


@dataclass
class Replayer(SessionRunner):
    """Replays one range of a topic; :meth:`run` returns the report."""

    done: int = field(default=0, init=False)

    def _done(self, tp: TopicPartition, offset: int) -> None:
        self.done += 1

    async def run(self, rng: ReplayRange) -> ReplayReport:
        async with self.session(None, self._done) as session:
            ranges = await plan_ranges(session.consumer, rng)
            complete = await self._consume(session.consumer, session.routing, ranges)
            return session.report(rng.topic, ranges, complete)

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        routing: Routing,
        ranges: Ranges,
    ) -> bool:
        todo, total = unfinished(ranges)
        self.report_progress(0, total)
        if not todo:
            return True
        consumer.assign(list(todo))
        for tp in todo:
            consumer.seek(tp, ranges[tp][0])
        in_flight: set[asyncio.Task[None]] = set()
        held = InFlightBytes(self.rcfg.max_in_flight_bytes)  # the router's byte bound too
        flush_every = self.rcfg.commit_interval_ms / 1000
        last_flush = last_data = time.monotonic()
        complete = True
        while todo:
            if self.stopping():
                complete = False
                break
            if len(in_flight) >= self.rcfg.max_in_flight or held.full:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            else:
                batches = await kafka.getmany(
                    consumer, *todo, timeout_ms=200, max_records=self.rcfg.max_poll_records
                )
                for tp, msgs in batches.items():
                    stop = todo.get(tp)
                    wanted = [m for m in msgs if stop is not None and m.offset < stop]
                    if not wanted:
                        continue
                    last_data = time.monotonic()
                    for msg, task in zip(wanted, await routing.submit(wanted), strict=True):
                        held.hold(msg, task)
                        in_flight.add(task)
                        task.add_done_callback(in_flight.discard)
                await wait_for_stops(consumer, todo)
                if todo and time.monotonic() - last_data > STALL_SECONDS:
                    log.warning(
                        "no records for %.0fs short of the stop offsets %s",
                        STALL_SECONDS,
                        {tp.partition: o for tp, o in todo.items()},
                    )
                    complete = False
                    break
            if time.monotonic() - last_flush > flush_every:
                await routing.flush_ledger()
                last_flush = time.monotonic()
            self.report_progress(self.done, total)
        grace = None if complete else self.settings.process.shutdown_grace_seconds
        if in_flight:
            _, still = await asyncio.wait(set(in_flight), timeout=grace)
            for t in still:
                t.cancel()
            if still:
                complete = False
                await asyncio.gather(*still, return_exceptions=True)
        await routing.flush_ledger()
        self.report_progress(total if complete else self.done, total)
        return complete
