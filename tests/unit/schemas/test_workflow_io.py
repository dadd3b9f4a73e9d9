"""TaskSpec.key_only: what a task's later state changes send instead of the whole spec."""

from __future__ import annotations

from schemas.workflow_io import PermitRequest, TaskSpec


def test_key_only_keeps_type_and_index_and_drops_the_content() -> None:
    spec = TaskSpec(
        "emit",
        3,
        payload={"trigger": {"event": {"data": "x" * 1000}}},
        config={"max_attempts": 2},
        idempotency_key="k",
        on_failure="pause",
        permit=PermitRequest("db"),
    )
    key = spec.key_only()
    assert (key.task_type, key.index) == ("emit", 3)
    assert key == TaskSpec("emit", 3)
    assert key.payload == {} and key.permit is None and key.idempotency_key is None
