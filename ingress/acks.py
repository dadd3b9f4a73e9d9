"""Which records of one fetched batch Kafka has acknowledged, and what that lets ingress commit.

A raw offset may be committed once it, and every offset fetched before it on its
partition, has its record (event or DLQ) acknowledged. Records are produced in
groups (one producer batch per events partition), so acknowledgements arrive
per group, out of the raw order; the commit point of a raw partition is its
lowest offset still unacknowledged, or one past the last offset of the batch
once all are. Offsets never fetched (compaction, transaction markers) are never
waited for.

Also counts what was acknowledged, per stamping strategy and per DLQ reason, for
the metrics (only acknowledged records count).
"""

from __future__ import annotations

from collections import Counter

from aiokafka.structs import ConsumerRecord, TopicPartition

from ingress.records import Outgoing


class BatchAcks:
    def __init__(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        self._tps = {(tp.topic, tp.partition): tp for tp in batch}
        self._pending = {
            (tp.topic, tp.partition): {m.offset for m in ms} for tp, ms in batch.items()
        }
        self._ends = {(tp.topic, tp.partition): ms[-1].offset + 1 for tp, ms in batch.items() if ms}
        self.stamped: Counter[str | None] = Counter()
        self.dead: Counter[str] = Counter()

    def ack(self, group: list[Outgoing]) -> dict[TopicPartition, int]:
        """Record ``group`` as acknowledged; the commit point of each partition it moved."""
        pending = self._pending
        touched = set()
        for rec in group:
            src = rec.source
            tp = (src.topic, src.partition)
            pending[tp].discard(src.offset)
            touched.add(tp)
            if rec.reason is None:
                self.stamped[rec.label] += 1
            else:
                self.dead[rec.reason] += 1
        out = {}
        for tp in touched:
            left = pending[tp]
            out[self._tps[tp]] = min(left) if left else self._ends[tp]
        return out

    @property
    def done(self) -> bool:
        return not any(self._pending.values())
