"""Consumer lag in seconds (``pipeline_consumer_lag_seconds``), for ingress and the router.

Definition, per assigned partition of a consumer (``component``, ``topic``, ``partition``):
the age of the oldest record the group has not committed, i.e. ``now - T`` where ``T`` is
the Kafka timestamp of the record at the group's committed offset, when the committed
offset is below the high watermark; 0 when it is not (caught up). ``now`` is read when
the gauge is scraped (the gauge is a function of this module's state, so it keeps
growing while the process is stuck and does not wait for the next refresh).

How ``T`` is known without reading anything from Kafka: a process sees every record it
fetches. For each fetched batch of a partition it keeps one pair, the batch's end offset
and the timestamp of its first record (no per-record work); a commit drops the pairs it
covers. While some fetched record is uncommitted, ``T`` is the first timestamp of the
oldest batch still held, the batch that holds the committed offset: exact when the commit
point is a batch's start, otherwise at most one batch's span older than the record at the
committed offset, so the gauge never reads less than the true age (timestamps of a
partition being in order, as they are from one producer or with ``LogAppendTime``).

Records not fetched yet (committed offset = position < high watermark: a paused
partition, a fetch loop blocked by other partitions' work, the moments between an
assignment and its first fetch) have a timestamp this process has not seen. The gauge is
then a lower bound: the time since this process first saw that partition behind with
nothing fetched (the record at the committed offset existed then, so it is at least that
old); it becomes exact at the next fetch. Records without a timestamp (``-1``) count as
fetched at the time they were fetched, a lower bound as well.

The message count (``pipeline_consumer_lag``) stays with each service; both gauges are
set at the same refresh and removed together when a partition is revoked.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import Gauge


class Record(Protocol):
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...


class Partition(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


class _Backlog:
    """One partition's fetched-but-uncommitted batches, oldest first."""

    __slots__ = ("batches", "behind_since")

    def __init__(self) -> None:
        # (end offset = last offset + 1, first record's timestamp in ms) per fetched batch
        # not wholly committed; end offsets strictly increase.
        self.batches: deque[tuple[int, int]] = deque()
        # Clock time the partition was first seen behind with nothing fetched, else None.
        self.behind_since: float | None = None

    def commit(self, offset: int) -> None:
        batches = self.batches
        while batches and batches[0][0] <= offset:
            batches.popleft()


class LagSeconds:
    """``gauge{component, topic, partition}``: see the module docstring for its meaning.

    Call :meth:`fetched` with every fetch's records, :meth:`committed` after a commit,
    :meth:`refresh` where the message lag is refreshed, :meth:`forget` on revoke (which
    also resets a partition assigned again).
    ``clock`` returns seconds since the epoch (record timestamps are epoch milliseconds).
    """

    def __init__(
        self, gauge: Gauge, component: str, clock: Callable[[], float] = time.time
    ) -> None:
        self.gauge = gauge
        self.component = component
        self.clock = clock
        self._parts: dict[Any, _Backlog] = {}

    def fetched(self, batch: Mapping[Any, Sequence[Record]]) -> None:
        """A fetch returned ``batch`` (``getmany``'s answer: records per partition, in
        offset order): per partition, remember where its records end and the first one's
        timestamp. Records fetched again after a seek add nothing."""
        for tp, records in batch.items():
            if not records:
                continue
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Backlog()
            end = records[-1].offset + 1
            if part.batches and end <= part.batches[-1][0]:
                continue
            ts = records[0].timestamp
            if ts is None or ts < 0:
                ts = int(self.clock() * 1000)
            part.batches.append((end, ts))
            part.behind_since = None

    def committed(self, offsets: Mapping[Any, int]) -> None:
        """The group committed ``offsets`` (per partition, the next record to read)."""
        for tp, offset in offsets.items():
            part = self._parts.get(tp)
            if part is not None:
                part.commit(offset)

    def refresh(
        self, tp: Partition, committed: int | None, high: int, position: int | None = None
    ) -> None:
        """Set ``tp``'s series from its committed offset and high watermark (the values the
        message lag is computed from); its value is computed when scraped. ``committed``
        None: the group has never committed ``tp``, so nothing fetched is committed, and
        the consumer's ``position`` says whether records are left to fetch."""
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Backlog()
        start = committed
        if committed is not None:
            part.commit(committed)
        else:
            start = position
        if part.batches or start is None or start >= high:
            part.behind_since = None
        elif part.behind_since is None:
            part.behind_since = self.clock()
        child = self.gauge.labels(self.component, tp.topic, str(tp.partition))
        child.set_function(lambda: self.age(part))

    def age(self, part: _Backlog) -> float:
        """The gauge's value for ``part`` now."""
        try:
            oldest: float | None = part.batches[0][1] / 1000
        except IndexError:  # nothing fetched is uncommitted
            oldest = part.behind_since
        return 0.0 if oldest is None else max(0.0, self.clock() - oldest)

    def value(self, tp: Partition) -> float | None:
        """The value ``tp``'s series would be scraped at now (None: no state)."""
        part = self._parts.get(tp)
        return None if part is None else self.age(part)

    def forget(self, revoked: Iterable[Partition]) -> None:
        """Drop the state and the series of ``revoked`` partitions (their next owner reports
        them), as the message lag's series are removed."""
        for tp in revoked:
            self._parts.pop(tp, None)
            try:
                self.gauge.remove(self.component, tp.topic, str(tp.partition))
            except KeyError:
                pass
