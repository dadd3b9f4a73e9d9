"""Per-partition offset tracking: commit only up to the highest contiguous done offset.

The router's: its starts, acknowledged by Temporal, finish out of order and across
fetches, and it must never commit past one that is not done. (Ingress delivers a
whole batch before it fetches the next, so its commit point is computed per batch
by ``ingress.acks.BatchAcks``.)

Starts within a batch complete out of order. If offsets 10, 11 and 13 are done
but 12 is still retrying against an unavailable Temporal, the partition may
commit 12 (meaning "next to read is 12"), never 14: a crash then redelivers 12
and 13, and 13's start is absorbed as a duplicate. Nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class PartitionOffsets:
    """Offsets handed out for one partition, and which of them are done."""

    # Next offset to commit (Kafka semantics: the first offset NOT yet processed).
    committed: int | None = None
    pending: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    # Highest offset ever added; offsets are added in increasing order.
    last_added: int = -1

    def add(self, offset: int) -> None:
        if offset <= self.last_added:
            return  # re-fetched after a seek: already tracked
        if self.committed is None:
            self.committed = offset
        self.pending.add(offset)
        self.last_added = offset

    def mark_done(self, offset: int) -> None:
        if offset in self.pending:
            self.pending.discard(offset)
            self.done.add(offset)

    def committable(self) -> int | None:
        """The offset to commit (next to read), or None if nothing new is contiguous."""
        if self.committed is None:
            return None
        nxt = self.committed
        # Fetched offsets may have gaps (compaction, transaction markers): an offset
        # that was never handed out and is below the last added one is not pending,
        # so it does not block the commit.
        while nxt <= self.last_added and nxt not in self.pending:
            self.done.discard(nxt)
            nxt += 1
        if nxt == self.committed:
            return None
        return nxt

    def advance(self, offset: int) -> None:
        """Record that ``offset`` was committed."""
        if self.committed is None or offset > self.committed:
            self.committed = offset
        self.done = {o for o in self.done if o >= offset}

    @property
    def in_flight(self) -> int:
        return len(self.pending)


class OffsetTracker:
    """All partitions of one consumer; keys are ``TopicPartition``-like hashables."""

    def __init__(self) -> None:
        self.parts: dict[object, PartitionOffsets] = {}

    def add(self, tp: object, offset: int) -> None:
        part = self.parts.get(tp)
        if part is None:
            part = self.parts[tp] = PartitionOffsets()
        part.add(offset)

    def mark_done(self, tp: object, offset: int) -> None:
        part = self.parts.get(tp)
        if part is not None:
            part.mark_done(offset)

    def committable(self, tps: Iterable[object] | None = None) -> dict[object, int]:
        wanted = (
            self.parts if tps is None else {tp: self.parts[tp] for tp in tps if tp in self.parts}
        )  # type: ignore[attr-defined]
        out = {}
        for tp, part in wanted.items():
            off = part.committable()
            if off is not None:
                out[tp] = off
        return out

    def advance(self, offsets: dict[object, int]) -> None:
        for tp, off in offsets.items():
            if tp in self.parts:
                self.parts[tp].advance(off)

    def forget(self, tps: Iterable[object]) -> None:
        for tp in tps:
            self.parts.pop(tp, None)

    @property
    def in_flight(self) -> int:
        return sum(p.in_flight for p in self.parts.values())
