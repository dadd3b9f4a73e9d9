"""`ingest ingress` as a real process: SIGKILL before commit, restart, SIGTERM.

The contract under test: a raw message produced but not committed is produced
again after a restart, with the same event_id, so the duplicate in the events
topic is byte-identical and lands on the same partition (keyed by event_id).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter

import orjson

from tests.support import ROOT
from tests.support.kafka import committed, count, produce, read_until, unfinished
from tests.support.process import start_ingress as start
from tests.support.wait import quiet, wait_until

N = 30


async def test_restart_before_commit_redelivers_with_the_same_ids(stack, topics, tmp_path) -> None:
    group = f"ingress-{uuid.uuid4()}"
    items: list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]] = [
        (None, orjson.dumps({"type": "t", "data": {"i": i}}), [], i % 3) for i in range(N)
    ]
    items.append((b"bad", b"{broken", [], 0))
    await produce(stack.kafka, topics.raw, items)

    # 1. produces everything, then sits in the (test-only) pre-commit delay: SIGKILL it.
    proc = start(stack, topics, group, INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS="120")
    try:
        assert await wait_until(produced(proc, stack, topics.events, N), 60)
        assert await wait_until(produced(proc, stack, topics.dlq, 1), 10)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    nothing = await committed(stack.kafka, group, topics.raw)
    assert set(nothing.values()) == {None}, nothing  # nothing was committed

    # 2. a clean instance: gets everything redelivered, SIGTERM drains and commits, exit 0.
    proc = start(stack, topics, group)
    try:
        assert await wait_until(produced(proc, stack, topics.events, 2 * N), 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert await unfinished(stack.kafka, group, topics.raw) == {}

    events = await read_until(stack.kafka, topics.events, 2 * N)
    assert len(events) == 2 * N
    ids = Counter(orjson.loads(m.value)["event_id"] for m in events)
    assert len(ids) == N and set(ids.values()) == {2}
    copies: dict[str, set[tuple[int, bytes, bytes]]] = {}
    for m in events:
        copies.setdefault(m.key.decode(), set()).add((m.partition, m.key, m.value))
    assert all(len(c) == 1 for c in copies.values())  # identical bytes, same partition
    dlq = await read_until(stack.kafka, topics.dlq, 2)
    assert [m.value for m in dlq] == [b"{broken", b"{broken"]

    # 3. a third start finds nothing to do: committed means done.
    log = tmp_path / "third.log"
    with log.open("wb") as err:
        proc = start(stack, topics, group, stderr=err)
    try:

        async def assigned() -> bool:
            return "assigned [" in log.read_text(errors="replace")

        assert await wait_until(assigned, 60), log.read_text()
        # Owning the partitions at their committed offsets, it must produce nothing:
        # the events topic stays at 2N through a quiet period.
        settled = await quiet(lambda: count(stack.kafka, topics.events), "the events topic", 3.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert settled == 2 * N


async def test_sigterm_during_the_commit_delay_still_commits(stack, topics) -> None:
    group = f"ingress-{uuid.uuid4()}"
    await produce(stack.kafka, topics.raw, [(None, b'{"type":"t"}', [], 1)] * 5)
    proc = start(stack, topics, group, INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS="120")
    try:
        assert await wait_until(produced(proc, stack, topics.events, 5), 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert await unfinished(stack.kafka, group, topics.raw) == {}


def test_unreachable_kafka_is_one_clear_line() -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "INGEST_METRICS_PORT": "0"}
    out = subprocess.run(
        [sys.executable, "-m", "app.commands", "ingress"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1" in lines[0], out.stderr


def produced(proc: subprocess.Popen[bytes], stack, topic: str, n: int):
    """A wait_until predicate: ``n`` records in ``topic``; fails fast if the process died."""

    async def check() -> bool:
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise AssertionError(f"ingress exited {proc.returncode}: {proc.stderr.read().decode()}")
        return await count(stack.kafka, topic) >= n

    return check
