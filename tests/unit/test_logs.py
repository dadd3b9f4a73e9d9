"""aiokafka's per-retry connection errors are throttled; everything else passes."""

from __future__ import annotations

import logging

from pipeline.logs import RepeatThrottle


def _record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_repeats_within_the_window_are_held_back_and_counted() -> None:
    now = [0.0]
    throttle = RepeatThrottle(window=10, clock=lambda: now[0])
    msg = "Unable connect to node with id %s: %s"
    passed = []
    for i in range(100):  # ten a second, as aiokafka retries
        now[0] = i / 10
        rec = _record("aiokafka", msg, 1, "refused")
        if throttle.filter(rec):
            passed.append(rec.getMessage())
    assert passed == ["Unable connect to node with id 1: refused"]
    now[0] = 10.0  # the window is over: the held-back ones are counted, not lost
    rec = _record("aiokafka", msg, 1, "refused")
    assert throttle.filter(rec)
    assert rec.getMessage() == (
        "Unable connect to node with id 1: refused (99 more like this in the last 10s)"
    )


def test_another_node_or_message_is_not_held_back() -> None:
    throttle = RepeatThrottle(window=10, clock=lambda: 0.0)
    assert throttle.filter(_record("aiokafka", "Unable connect to node with id %s", 1))
    assert throttle.filter(_record("aiokafka", "Unable connect to node with id %s", 2))
    assert throttle.filter(_record("aiokafka.consumer.fetcher", "Failed fetch from %s", 1))
    assert not throttle.filter(_record("aiokafka", "Unable connect to node with id %s", 1))


def test_our_own_logs_and_info_are_never_throttled() -> None:
    throttle = RepeatThrottle(window=10, clock=lambda: 0.0)
    for _ in range(3):
        assert throttle.filter(_record("router.service", "commit failed, will retry: %s", "x"))
        assert throttle.filter(_record("aiokafka", "joined %s", "g", level=logging.INFO))
