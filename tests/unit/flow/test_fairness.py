"""flow.fairness: the key and weight the router reads from the event (refused at the edge
when unusable), and the one ``Priority`` the starter sends with them (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.common import Priority

from pipeline.starter import STARTED, Starter, start_priority
from router.flow.keys import read_keys
from schemas.definitions import ActivityDef
from schemas.envelope import EnvelopeError
from schemas.flow.fairness import MAX_FAIRNESS_KEY_BYTES, Fairness, fairness_of
from schemas.flow.spec import R_BAD_FLOW_KEY, R_FLOW_KEY_MISSING, FairnessDef, FlowDef
from schemas.workflow_io import RunActivityInput


def _flow(fairness: dict[str, Any], **more: Any) -> FlowDef:
    return FlowDef.model_validate({"fairness": fairness, **more})


def _event(**data: Any) -> dict[str, Any]:
    return {"type": "t", "data": data}


def test_fixed_weight_default_weight_and_weight_from_the_event() -> None:
    assert read_keys(
        _flow({"key": "data.tenant", "weight": 2}), _event(tenant="acme")
    ).fairness == (Fairness("acme", 2.0))
    assert read_keys(_flow({"key": "data.tenant"}), _event(tenant=42)).fairness == Fairness("42")
    fk = read_keys(_flow({"key": "data.tenant", "weight_key": "data.w"}), _event(tenant="a", w=0.5))
    assert fk.fairness == Fairness("a", 0.5)
    assert fk.key("fairness") == "a"  # one read of the key, like every control's


def test_no_fairness_declared_nothing_read() -> None:
    flow = FlowDef.model_validate({"throttle": {"limit": 1, "period": 1}})
    assert read_keys(flow, _event()).fairness is None


@pytest.mark.parametrize(
    ("data", "reason", "detail"),
    [
        ({}, R_FLOW_KEY_MISSING, "flow.fairness.key 'data.tenant': missing"),
        ({"tenant": None}, R_FLOW_KEY_MISSING, "is null"),
        ({"tenant": "x" * 65}, R_BAD_FLOW_KEY, "65 bytes, over Temporal's 64-byte"),
        ({"tenant": "é" * 33}, R_BAD_FLOW_KEY, "66 bytes"),  # bytes, not characters
        ({"tenant": "a"}, R_FLOW_KEY_MISSING, "flow.fairness.weight_key 'data.w': missing"),
        ({"tenant": "a", "w": None}, R_FLOW_KEY_MISSING, "weight_key 'data.w': missing"),
        ({"tenant": "a", "w": 0}, R_BAD_FLOW_KEY, "is 0, not a number above 0"),
        ({"tenant": "a", "w": -1.5}, R_BAD_FLOW_KEY, "is -1.5"),
        ({"tenant": "a", "w": "2"}, R_BAD_FLOW_KEY, "is '2'"),
        ({"tenant": "a", "w": True}, R_BAD_FLOW_KEY, "is True"),
        ({"tenant": "a", "w": 1000.5}, R_BAD_FLOW_KEY, "at most 1000"),
        ({"tenant": "a", "w": float("nan")}, R_BAD_FLOW_KEY, "is nan"),
        ({"tenant": "a", "w": [1]}, R_BAD_FLOW_KEY, "is [1]"),
    ],
)
def test_an_unusable_key_or_weight_is_refused_at_the_edge(
    data: dict[str, Any], reason: str, detail: str
) -> None:
    flow = _flow({"key": "data.tenant", "weight_key": "data.w"})
    with pytest.raises(EnvelopeError) as err:
        read_keys(flow, _event(**data))
    assert err.value.reason == reason
    assert detail in err.value.detail


def test_the_longest_key_temporal_takes_passes() -> None:
    key = "k" * MAX_FAIRNESS_KEY_BYTES
    assert fairness_of(FairnessDef(key="data.t"), _event(t=key)) == Fairness(key)
    assert fairness_of(FairnessDef(key="data.t", weight_key="data.w"), _event(t="a", w=1000)) == (
        Fairness("a", 1000.0)
    )


def test_the_definition_refuses_both_weights_and_a_bad_fixed_weight() -> None:
    with pytest.raises(ValueError, match="not both"):
        _flow({"key": "data.t", "weight": 1, "weight_key": "data.w"})
    for bad in (0, -1, 1001):
        with pytest.raises(ValueError):
            _flow({"key": "data.t", "weight": bad})
    with pytest.raises(ValueError):
        FlowDef.model_validate({"fairness": {"weight": 1}})  # the key is required


def test_a_cron_activity_cannot_declare_fairness() -> None:
    # A cron fire has no event to read the key from (schemas/definitions.py, flow.keys()).
    with pytest.raises(ValueError, match=r"flow.fairness.key needs an event trigger"):
        ActivityDef.model_validate(
            {
                "id": "5b1f0e7a-2d10-4b1f-9c41-6f1c1c6e3b8e",
                "name": "cron",
                "trigger": {"type": "cron", "cron": "* * * * *"},
                "tasks": [{"type": "noop"}],
                "flow": {"fairness": {"key": "data.tenant"}},
            }
        )


# --- The Priority the starter sends -----------------------------------------------------


def test_without_priority_or_fairness_the_start_sends_what_it_always_sent() -> None:
    assert start_priority(None, None) is Priority.default
    assert start_priority(2, None) == Priority(priority_key=2)


def test_priority_and_fairness_go_in_one_priority() -> None:
    assert start_priority(1, Fairness("acme", 3.0)) == Priority(
        priority_key=1, fairness_key="acme", fairness_weight=3.0
    )
    # No weight: none sent (the server's default 1, or the queue's override for the key).
    got = start_priority(None, Fairness("acme"))
    assert got == Priority(fairness_key="acme")
    proto = got._to_proto()
    assert (proto.priority_key, proto.fairness_weight) == (0, 0.0)  # 0: unset, the default


class _Client:
    """Records the keyword arguments of each start (the start itself is Temporal's)."""

    def __init__(self) -> None:
        self.starts: list[dict[str, Any]] = []

    async def start_workflow(self, *args: Any, **kw: Any) -> None:
        self.starts.append(kw)


async def test_the_starter_passes_the_fairness_to_the_start() -> None:
    client = _Client()
    starter = Starter(client, "q")  # type: ignore[arg-type]
    run = RunActivityInput.for_event("5b1f0e7a-2d10-4b1f-9c41-6f1c1c6e3b8e", "e1", _event())
    assert await starter.start(run, fairness=Fairness("acme", 2.0)) == STARTED
    assert await starter.start(run) == STARTED
    assert [s["priority"] for s in client.starts] == [
        Priority(fairness_key="acme", fairness_weight=2.0),
        Priority.default,
    ]
