"""A consumer over an in-memory log, enough for ``ops.dlq.read_newest``: assign, pause,
resume, seek, getmany. It counts the records it hands out, so a test can tell what a
peek read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

Record = (
    bytes | tuple[bytes | None, bytes, list[tuple[str, bytes]]]
)  # value, or (key, value, headers)


class FakeLog:
    def __init__(
        self,
        log: dict[TopicPartition, Sequence[Record]],
        fail: dict[TopicPartition, Exception] | None = None,
        batch: int = 3,
    ) -> None:
        self.log = {
            tp: [self._record(tp, o, r) for o, r in enumerate(rs)] for tp, rs in log.items()
        }
        self.fail = fail or {}
        self.batch = batch  # records a fetch returns at most (a broker's fetch size)
        self.position: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.handed: list[tuple[int, int]] = []  # (partition, offset) handed out, in order

    @staticmethod
    def _record(tp: TopicPartition, offset: int, r: Record) -> ConsumerRecord:
        key, value, headers = (None, r, []) if isinstance(r, bytes) else r
        return ConsumerRecord(
            tp.topic, tp.partition, offset, 1000 + offset, 0, key, value, None,
            len(key or b""), len(value), headers,
        )  # fmt: skip

    @property
    def begin(self) -> dict[TopicPartition, int]:
        return dict.fromkeys(self.log, 0)

    @property
    def end(self) -> dict[TopicPartition, int]:
        return {tp: len(rs) for tp, rs in self.log.items()}

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position[tp] = offset

    async def getmany(
        self, *parts: TopicPartition, timeout_ms: int, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[Any]] = {}
        for tp in parts:
            if tp in self.paused:
                continue
            if tp in self.fail:
                raise self.fail[tp]
            pos = self.position[tp]
            got = self.log[tp][pos : pos + min(self.batch, max_records or self.batch)]
            if got:
                out[tp] = got
                self.position[tp] = got[-1].offset + 1
                self.handed += [(tp.partition, m.offset) for m in got]
        return out
