"""Static group membership (``KAFKA_GROUP_INSTANCE_ID``, KIP-345) with two real
``ingest router`` processes in one group on a six-partition topic of the real Kafka.

One router (B) is stopped with SIGTERM and started again 4 s later, well within the
session timeout (aiokafka's 10 s). The other (A) logs ``assigned [...]`` on every assignment its
rebalance listener receives (``pipeline/rebalance.py``), so its log counts the rebalances
it went through:

* dynamic membership (the variable empty): B leaves the group on stop (one rebalance, A
  takes all six partitions) and joins again on start (a second one): 2;
* static membership: B does not leave, comes back under the same instance id and gets
  its own partitions again without a rebalance: 0, also after B's session timeout passed.

And two live routers of one group that share an instance id: the broker fences one at
each join, so they take the partitions from each other every few seconds (or one stops
with an error naming ``KAFKA_GROUP_INSTANCE_ID``).
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
import uuid
from dataclasses import dataclass, field

import pytest

from pipeline.clients import ensure_topics
from pipeline.settings import KafkaSettings
from tests.support.process import router_env, spawn_router
from tests.support.wait import eventually, wait_until

PARTITIONS = 6
# aiokafka's default session.timeout.ms, which the router's consumer keeps.
SESSION_TIMEOUT_S = 10.0
# Longer than aiokafka's heartbeat interval (3 s), shorter than the session timeout.
RESTART_PAUSE_S = 4.0
_ASSIGNED = re.compile(r"assigned \[(.*)\]")


@dataclass
class Router:
    """One ``ingest router`` process and what it logged (stdout and stderr, one pipe)."""

    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, env: dict[str, str]) -> Router:
        r = cls(await spawn_router(env))
        r.reader = asyncio.create_task(r._read())
        return r

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip())

    def assignments(self) -> list[list[int]]:
        """Every assignment logged, in order, as partition numbers."""
        out = []
        for line in self.lines:
            m = _ASSIGNED.search(line)
            if m:
                out.append(sorted(int(p) for p in re.findall(r"(\d+)\)", m.group(1))))
        return out

    def log(self) -> str:
        return "\n".join(self.lines[-60:])

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        if self.reader is not None:
            await self.reader
        return code


async def _routers(cfg, group: str, **extra: str) -> tuple[dict[str, str], str]:
    topic = f"static-{uuid.uuid4().hex[:10]}"
    await ensure_topics(KafkaSettings(bootstrap_servers=cfg.kafka.bootstrap_servers), [topic], 6)
    env = router_env(cfg, group, 0, KAFKA_EVENTS_TOPIC=topic, INGEST_LOG_LEVEL="INFO", **extra)
    return env, topic


async def _both_own_half(a: Router, b: Router) -> None:
    async def settled() -> bool:
        assert a.proc.returncode is None, a.log()
        assert b.proc.returncode is None, b.log()
        sa, sb = a.assignments(), b.assignments()
        return bool(sa and sb) and len(sa[-1]) == len(sb[-1]) == PARTITIONS // 2

    await eventually(settled, 90, "both routers to own three partitions each")


@pytest.mark.parametrize(("mode", "expected"), [("static", 0), ("dynamic", 2)])
async def test_restart_within_session_timeout(cfg, mode: str, expected: int) -> None:
    group = f"static-{mode}-{uuid.uuid4().hex[:8]}"
    env, _ = await _routers(cfg, group)

    def member(name: str) -> dict[str, str]:
        # Empty is dynamic membership (today's behaviour), as an unset variable is.
        return {**env, "KAFKA_GROUP_INSTANCE_ID": f"router-{name}" if mode == "static" else ""}

    a = await Router.start(member("a"))
    await _assigned(a, "A")
    b = await Router.start(member("b"))
    try:
        await _both_own_half(a, b)
        seen_by_a = len(a.assignments())
        owned_by_b = b.assignments()[-1]

        # B stops and, like a restarted pod, is back a few seconds later: after one
        # heartbeat interval of A (so a leave is seen before the rejoin rather than both
        # merging into one rebalance) and well inside the session timeout.
        assert await b.stop() == 0, b.log()
        stopped = time.monotonic()
        await asyncio.sleep(RESTART_PAUSE_S)
        b2 = await Router.start(member("b"))
        try:
            await _assigned(b2, "the restarted B")
            rejoined = time.monotonic() - stopped
            print(f"{mode}: B was back {rejoined:.1f}s after it stopped")
            assert rejoined < SESSION_TIMEOUT_S, f"B took {rejoined:.1f}s to rejoin"
            # Past B's session timeout (and a few heartbeats): a static member the broker
            # had given up on would have cost a rebalance by now.
            await asyncio.sleep(max(0.0, stopped + SESSION_TIMEOUT_S + 6 - time.monotonic()))
            rebalances = len(a.assignments()) - seen_by_a
            print(f"{mode} membership: router A went through {rebalances} rebalance(s)")
            assert rebalances == expected, a.log()
            assert a.proc.returncode is None and b2.proc.returncode is None
            if mode == "static":
                assert b2.assignments() == [owned_by_b], "B's own partitions, unchanged"
            else:
                assert a.assignments()[seen_by_a] == list(range(PARTITIONS)), a.log()
        finally:
            assert await b2.stop() == 0, b2.log()
    finally:
        await b.stop()
        assert await a.stop() == 0, a.log()


async def test_shared_instance_id_is_fenced(cfg) -> None:
    """Two live routers of one group with one instance id: each join fences the other.

    aiokafka 0.14 sends heartbeats without the instance id (Heartbeat v0/v1), so the
    fenced member hears "member_id was not recognized", rejoins, and fences the other in
    turn: both keep taking all six partitions, one heartbeat interval apart. When a join
    is answered FENCED_INSTANCE_ID instead, the consumer stops with an error that names
    KAFKA_GROUP_INSTANCE_ID (pipeline.kafka.FencedInstanceId) and the router exits 1.
    """
    group = f"static-dup-{uuid.uuid4().hex[:8]}"
    env, _ = await _routers(cfg, group, KAFKA_GROUP_INSTANCE_ID="router-same")
    a = await Router.start(env)
    await _assigned(a, "A")
    b = await Router.start(env)
    try:
        await asyncio.sleep(20)
        every = list(range(PARTITIONS))
        exited = [r for r in (a, b) if r.proc.returncode is not None]
        for r in exited:
            assert r.proc.returncode != 0, r.log()
            assert "FENCED_INSTANCE_ID" in r.log() and "KAFKA_GROUP_INSTANCE_ID" in r.log()
        for r in (a, b):
            if r not in exited:
                # Fenced again and again: all six partitions, taken back repeatedly.
                assert r.assignments().count(every) >= 3, r.log()
                assert "member_id was not recognized" in r.log(), r.log()
        print(
            "shared instance id:",
            [len(r.assignments()) for r in (a, b)],
            "assignments in 20 s;",
            len(exited),
            "router(s) exited",
        )
    finally:
        for r in (a, b):
            await r.stop()


async def _assigned(r: Router, name: str) -> None:
    async def has_partitions() -> bool:
        assert r.proc.returncode is None, f"router {name} exited:\n{r.log()}"
        return bool(r.assignments())

    if not await wait_until(has_partitions, 60):
        raise AssertionError(f"router {name} got no partitions in 60 s:\n{r.log()}")
