"""flow.concurrency's slot and flow.priority, as start_run records them (pure)."""

from __future__ import annotations

import re

import pytest

from schemas.flow.concurrency import DEFAULT_PRIORITY, flow_slot_for, priority_of
from schemas.flow.spec import FlowDef, FlowKeyMissing
from schemas.ids import flow_resource, permit_workflow_id

A = "5b1f0e7a-2d10-4b1f-9c41-6f1c1c6e3b8e"


def test_flow_resource_format_is_pinned() -> None:
    # The contract: these exact strings, forever (schemas/ids.py).
    assert flow_resource(A, None) == f"flow.{A}"
    assert flow_resource(A, "cust-42") == f"flow.{A}.503917db-5ae5-5e66-a2b0-28a58c3991b5"


def test_flow_resource_hashes_any_key_into_a_valid_permit_id() -> None:
    odd = "a:b/c" * 100
    res = flow_resource(A, odd)
    assert ":" not in res and len(res) == len(f"flow.{A}.") + 36
    assert permit_workflow_id(res, "0").count(":") == 2
    assert flow_resource(A, "k1") != flow_resource(A, "k2") != flow_resource(A, None)
    with pytest.raises(ValueError):
        flow_resource(A, "")


def test_no_concurrency_no_slot() -> None:
    assert flow_slot_for(A, None, {}) is None
    throttled = FlowDef.model_validate({"throttle": {"limit": 1, "period": 1}})
    assert flow_slot_for(A, throttled, {}) is None


def test_slot_per_key_value_with_priority() -> None:
    flow = FlowDef.model_validate(
        {"concurrency": {"limit": 2, "key": "data.k"}, "priority": {"key": "data.p"}}
    )
    slot = flow_slot_for(A, flow, {"data": {"k": 7, "p": 1}})
    assert slot is not None
    assert (slot.resource, slot.key, slot.limit, slot.priority) == (
        flow_resource(A, "7"),
        "7",
        2,
        1,
    )


def test_a_missing_concurrency_key_is_an_error_on_the_event() -> None:
    flow = FlowDef.model_validate({"concurrency": {"limit": 2, "key": "data.k"}})
    with pytest.raises(FlowKeyMissing, match=re.escape("flow.concurrency.key 'data.k': missing")):
        flow_slot_for(A, flow, {"data": {}})


@pytest.mark.parametrize("value", [0, 6, "1", 1.0, True, None, [1]])
def test_a_priority_read_from_the_event_must_be_an_integer_1_to_5(value: object) -> None:
    prio = FlowDef.model_validate(
        {"concurrency": {"limit": 1}, "priority": {"key": "data.p"}}
    ).priority
    with pytest.raises(FlowKeyMissing, match=re.escape("not an integer 1..5")) as info:
        priority_of(prio, {"data": {"p": value}})
    assert info.value.reason == "flow_key_missing"


def test_priority_fixed_default_and_missing() -> None:
    fixed = FlowDef.model_validate({"concurrency": {"limit": 1}, "priority": {"fixed": 5}})
    assert priority_of(fixed.priority, None) == 5
    assert priority_of(None, {"data": {}}) == DEFAULT_PRIORITY == 3
    keyed = FlowDef.model_validate({"concurrency": {"limit": 1}, "priority": {"key": "data.p"}})
    with pytest.raises(FlowKeyMissing, match="missing from the event"):
        priority_of(keyed.priority, {"data": {}})
