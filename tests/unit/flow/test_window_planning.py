"""What a debounced or batched run's tasks see: the batch's events, the window's facts;
and an event run's payload unchanged (no new keys for runs without a window)."""

from __future__ import annotations

import pytest

from schemas.definitions import TaskDef
from schemas.workflow_io import RunActivityInput
from workers.planning import PlanError, plan

ACT = "550e8400-e29b-41d4-a716-446655440000"
MEMBERS = [(f"e{i}", {"type": "t", "event_id": f"e{i}", "data": {"n": i}}) for i in range(3)]


def _defs(*items: dict) -> list[TaskDef]:
    return [TaskDef.model_validate(i) for i in items]


def test_a_batch_task_sees_every_event_and_the_window():
    run = RunActivityInput.for_window(ACT, "batch", "k", MEMBERS, "full")
    (spec,) = plan(_defs({"type": "noop", "payload": {"x": 1}}), run)
    assert spec.payload["events"] == [m[1] for m in MEMBERS]
    assert spec.payload["event"] is None and spec.payload["x"] == 1
    window = spec.payload["trigger"]["window"]
    assert window == {
        "kind": "batch", "key": "k", "size": 3, "first_event_id": "e0",
        "last_event_id": "e2", "closed_by": "full",
    }  # fmt: skip


def test_a_debounce_task_sees_the_last_event_and_its_template_renders_over_it():
    run = RunActivityInput.for_window(ACT, "debounce", "k", MEMBERS, "quiet")
    (spec,) = plan(_defs({"type": "noop", "idempotency_key": "{data.n}:{window.size}"}), run)
    assert spec.payload["event"] == MEMBERS[-1][1] and "events" not in spec.payload
    assert spec.idempotency_key == "2:3"


def test_a_batch_has_no_single_event_to_render_a_key_from():
    run = RunActivityInput.for_window(ACT, "batch", "k", MEMBERS, "full")
    with pytest.raises(PlanError, match=r"data\.n"):
        plan(_defs({"type": "noop", "idempotency_key": "{data.n}"}), run)


def test_an_event_run_gets_no_window_keys():
    run = RunActivityInput.for_event(ACT, "e1", {"type": "t", "event_id": "e1"})
    (spec,) = plan(_defs({"type": "noop"}), run)
    assert "events" not in spec.payload and "window" not in spec.payload["trigger"]
