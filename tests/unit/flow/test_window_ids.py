"""The ids of debounced and batched runs: derived from what the window holds, never from
when it closed (schemas/ids.py). Pinned, like every contract id: they must never change."""

from __future__ import annotations

import hashlib
import random

import pytest

from schemas import ids
from schemas.workflow_io import RunActivityInput

ACT = "550e8400-e29b-41d4-a716-446655440000"


def test_formats_are_pinned():
    assert (
        ids.batch_workflow_id(ACT, ["e2", "e1", "e3"])
        == "activity-550e8400-e29b-41d4-a716-446655440000:batch-6f24cd7c049a761254599a93d0c9b93e"
    )
    assert (
        ids.debounce_workflow_id(ACT, "e1", "e9")
        == "activity-550e8400-e29b-41d4-a716-446655440000:debounce-0be88a7b6c8139d862c130ecb9a1bef6"
    )
    assert (
        ids.window_workflow_id(ACT, "cust-42")
        == "flow-window-550e8400-e29b-41d4-a716-446655440000:683c127587ed4fd1a441a75098517710"
    )


def test_the_digest_is_sha256_of_length_prefixed_sorted_ids():
    digest = hashlib.sha256(b"2:e12:e22:e3").hexdigest()[:32]
    assert ids.batch_workflow_id(ACT, ["e3", "e1", "e2"]).endswith(f":batch-{digest}")


def test_a_batch_id_ignores_arrival_order_and_repeats():
    members = [f"evt-{i}" for i in range(25)]
    shuffled = random.Random(7).sample(members, len(members))
    assert ids.batch_workflow_id(ACT, members) == ids.batch_workflow_id(ACT, shuffled)
    assert ids.batch_workflow_id(ACT, members) == ids.batch_workflow_id(ACT, members + members[:3])


def test_different_contents_give_different_ids():
    assert ids.batch_workflow_id(ACT, ["a", "b"]) != ids.batch_workflow_id(ACT, ["a", "b", "c"])
    # the length prefix: no id can move the boundary between two others
    assert ids.batch_workflow_id(ACT, ["a:b", "c"]) != ids.batch_workflow_id(ACT, ["a", "b:c"])
    assert ids.batch_workflow_id(ACT, ["ab", "c"]) != ids.batch_workflow_id(ACT, ["a", "bc"])
    assert ids.debounce_workflow_id(ACT, "a", "b") != ids.debounce_workflow_id(ACT, "b", "a")
    assert ids.debounce_workflow_id(ACT, "ab", "c") != ids.debounce_workflow_id(ACT, "a", "bc")
    other = "00000000-0000-4000-8000-000000000000"
    assert ids.batch_workflow_id(ACT, ["a"]) != ids.batch_workflow_id(other, ["a"])
    assert ids.window_workflow_id(ACT, ids.NO_KEY) != ids.window_workflow_id(ACT, "k")


def test_empty_contents_are_refused():
    with pytest.raises(ValueError):
        ids.batch_workflow_id(ACT, [])
    with pytest.raises(ValueError):
        ids.batch_workflow_id(ACT, ["a", ""])
    with pytest.raises(ValueError):
        ids.debounce_workflow_id(ACT, "", "b")


def _members(*event_ids: str) -> list[tuple[str, dict[str, object]]]:
    return [(e, {"type": "t", "event_id": e, "data": {"n": i}}) for i, e in enumerate(event_ids)]


def test_a_debounce_run_carries_its_last_event():
    run = RunActivityInput.for_window(ACT, "debounce", "c1", _members("a", "b", "c"), "quiet")
    assert run.workflow_id == ids.debounce_workflow_id(ACT, "a", "c")
    assert run.run_id == str(ids.run_id_for(run.workflow_id))
    assert run.trigger_kind == "event"
    assert run.event_id == "c" and run.event == {"type": "t", "event_id": "c", "data": {"n": 2}}
    assert run.events is None
    assert run.window is not None and (run.window.size, run.window.closed_by) == (3, "quiet")


def test_a_batch_run_carries_every_event_in_order():
    run = RunActivityInput.for_window(ACT, "batch", "", _members("b", "a"), "timeout")
    assert run.workflow_id == ids.batch_workflow_id(ACT, ["a", "b"])
    assert run.event_id is None and run.event is None
    assert [e["event_id"] for e in run.events or []] == ["b", "a"]
    with pytest.raises(ValueError):
        RunActivityInput.for_window(ACT, "batch", "", [], "timeout")
    with pytest.raises(ValueError):
        RunActivityInput.for_window(ACT, "sliding", "", _members("a"), "timeout")
