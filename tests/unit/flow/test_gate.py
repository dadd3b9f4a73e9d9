"""The flow gate's logic and the GCRA parameters, with a fake store and a fake Temporal."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from router.flow.gate import START, Decision, FlowGate
from router.flow.keys import FlowKeys, read_keys
from router.flow.pacing import Gcra
from router.flow.store import Checked, Decided
from schemas.flow.spec import FlowDef, FlowKeyMissing, RateLimitDef, ThrottleDef
from schemas.workflow_io import RunActivityInput
from tests.support.metrics import metric_value

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def run(event_id: str = "e1") -> RunActivityInput:
    return RunActivityInput.for_event(str(uuid.uuid4()), event_id, {"type": "t", "data": {}})


def decided(outcome: str = "start", **kw: Any) -> Decided:
    base = dict(
        reason=None, start_at=None, cancelled=None, holder=None, holder_since=None, fresh=True
    )
    return Decided(outcome=outcome, now=NOW, **{**base, **kw})


class FakeStore:
    def __init__(self, *answers: Decided) -> None:
        self.answers = list(answers)
        self.calls: list[Checked | None] = []

    async def decide(self, run: Any, fk: Any, checked: Checked | None = None) -> Decided:
        self.calls.append(checked)
        return self.answers.pop(0)


class FakeTemporal:
    def __init__(self, running: set[str]) -> None:
        self.running = running
        self.cancelled: list[str] = []
        self.reasons: list[str | None] = []

    def get_workflow_handle(self, wid: str) -> Any:
        outer = self

        class Handle:
            async def describe(self) -> Any:
                status = (
                    WorkflowExecutionStatus.RUNNING
                    if wid in outer.running
                    else WorkflowExecutionStatus.TERMINATED
                )
                return type("Desc", (), {"status": status})()

            async def cancel(self, reason: str | None = None) -> None:
                outer.cancelled.append(wid)
                outer.reasons.append(reason)

        return Handle()


def gate(store: FakeStore, temporal: FakeTemporal | None = None) -> FlowGate:
    return FlowGate(store, temporal or FakeTemporal(set()))  # type: ignore[arg-type]


THROTTLED = FlowKeys(FlowDef(throttle=ThrottleDef(limit=5, period=2.0)))
SINGLE = FlowKeys(FlowDef.model_validate({"singleton": {"mode": "cancel"}}))


def test_gcra_parameters():
    assert Gcra.throttle(ThrottleDef(limit=5, period=2.0)) == Gcra(0.4, 0.0)
    assert Gcra.throttle(ThrottleDef(limit=5, period=2.0, burst=3)) == Gcra(0.4, 0.8)
    assert Gcra.rate_limit(RateLimitDef(limit=5, period=10.0)) == Gcra(2.0, 8.0)


def test_gcra_next_start_and_conformance():
    g = Gcra(0.4, 0.8)
    assert g.next_start(NOW + timedelta(seconds=2), NOW) == NOW + timedelta(seconds=1.2)
    assert g.next_start(NOW - timedelta(seconds=5), NOW) == NOW  # idle: at once
    r = Gcra(2.0, 8.0)
    assert r.conforms(NOW + timedelta(seconds=8), NOW)
    assert not r.conforms(NOW + timedelta(seconds=8.001), NOW)


def test_keys_are_read_per_control_and_a_missing_one_raises():
    flow = FlowDef.model_validate(
        {"throttle": {"limit": 1, "period": "1s", "key": "data.c"}, "singleton": {"mode": "skip"}}
    )
    fk = read_keys(flow, {"data": {"c": 7}})
    assert (fk.key("throttle"), fk.key("singleton")) == ("7", "")
    with pytest.raises(FlowKeyMissing, match=r"flow\.throttle\.key 'data\.c'"):
        read_keys(flow, {"data": {}})


async def test_no_gated_control_needs_no_store_call():
    store = FakeStore()
    conc = FlowKeys(FlowDef.model_validate({"concurrency": {"limit": 2}}))
    assert await gate(store).decide(run(), None) is START
    assert await gate(store).decide(run(), conc) is START
    assert store.calls == []


async def test_a_throttled_start_gets_its_delay_and_counts_once():
    r = run()
    g = gate(FakeStore(decided(start_at=NOW + timedelta(seconds=1.2))))
    assert await g.decide(r, THROTTLED) == Decision(start_delay=timedelta(seconds=1.2))
    assert metric_value("pipeline_flow_runs_delayed_total", activity=r.activity_id) == 1
    # The same decision read back (a redelivery) is not counted again.
    g.store = FakeStore(decided(start_at=NOW + timedelta(seconds=1.2), fresh=False))  # type: ignore[assignment]
    assert (await g.decide(r, THROTTLED)).start_delay == timedelta(seconds=1.2)
    assert metric_value("pipeline_flow_runs_delayed_total", activity=r.activity_id) == 1
    # A slot already due starts at once.
    g.store = FakeStore(decided(start_at=NOW - timedelta(seconds=1)))  # type: ignore[assignment]
    assert await g.decide(r, THROTTLED) is START


async def test_a_skip_is_counted_only_when_decided():
    r = run()
    rl = FlowKeys(FlowDef(rate_limit=RateLimitDef(limit=1, period=1.0)))
    g = gate(
        FakeStore(
            decided("skip", reason="rate_limit"), decided("skip", reason="rate_limit", fresh=False)
        )
    )
    for _ in range(2):
        assert await g.decide(r, rl) == Decision(skip="rate_limit")
    assert (
        metric_value(
            "pipeline_flow_runs_skipped_total", activity=r.activity_id, reason="rate_limit"
        )
        == 1
    )
    assert (
        metric_value("pipeline_flow_runs_skipped_total", activity=r.activity_id, reason="singleton")
        == 0
    )


async def test_singleton_asks_temporal_then_decides_with_its_answer():
    since = NOW - timedelta(seconds=1)
    store = FakeStore(
        decided("check", holder="old", holder_since=since),
        decided(cancelled="old"),
    )
    temporal = FakeTemporal(running={"old"})
    new = run()
    assert await gate(store, temporal).decide(new, SINGLE) is START
    assert store.calls == [None, Checked("old", True)]
    assert temporal.cancelled == ["old"]
    # The reason the cancelled run's row ends with: the run that took its key.
    assert temporal.reasons == [f"singleton:{new.workflow_id}"]
    # A closed holder is reported as not running.
    store = FakeStore(decided("check", holder="gone", holder_since=since), decided())
    await gate(store, FakeTemporal(running=set())).decide(run(), SINGLE)
    assert store.calls[1] == Checked("gone", False)


async def test_a_holder_that_keeps_changing_is_retried_by_the_router():
    since = NOW
    store = FakeStore(*(decided("check", holder=f"h{i}", holder_since=since) for i in range(5)))
    with pytest.raises(ConnectionError):
        await gate(store, FakeTemporal({"h0", "h1", "h2", "h3", "h4"})).decide(run(), SINGLE)
