import pytest

from schemas.definitions import TaskDef
from schemas.ids import event_workflow_id, run_id_for
from schemas.workflow_io import RunActivityInput
from workers.options import handler_options
from workers.planning import PlanError, plan, trigger_context

ACT = "550e8400-e29b-41d4-a716-446655440000"
WF = event_workflow_id(ACT, "evt-1")
EVENT = {"event_id": "evt-1", "type": "order.created", "data": {"message_id": "m-1"}}
RUN = RunActivityInput(
    activity_id=ACT, workflow_id=WF, run_id=str(run_id_for(WF)), trigger_kind="event",
    event_id="evt-1", event=EVENT,
)  # fmt: skip
CRON = RunActivityInput(
    activity_id=ACT, workflow_id="w", run_id="r", trigger_kind="cron",
    scheduled_for="2026-03-01T09:00:00+00:00", context_window_start="2026-03-01T08:00:00+00:00",
    context_window_end="2026-03-01T09:00:00+00:00",
)  # fmt: skip


def defs(*items: dict) -> list[TaskDef]:
    return [TaskDef.model_validate(i) for i in items]


def test_count_expands_and_index_is_position_in_the_whole_plan() -> None:
    specs = plan(defs({"type": "emit", "count": 2}, {"type": "noop"}), RUN)
    assert [(s.task_type, s.index) for s in specs] == [("emit", 0), ("emit", 1), ("noop", 2)]


def test_plan_is_deterministic() -> None:
    d = defs({"type": "emit", "payload": {"x": 1}, "idempotency_key": "{data.message_id}"})
    assert plan(d, RUN) == plan(d, RUN)


def test_payload_carries_definition_trigger_and_event() -> None:
    (spec,) = plan(defs({"type": "emit", "payload": {"x": 1}, "config": {"topic": "t"}}), RUN)
    assert spec.payload["x"] == 1
    assert spec.payload["event"] == EVENT
    assert spec.payload["trigger"]["run_id"] == RUN.run_id
    assert spec.payload["trigger"]["event_id"] == "evt-1"
    assert spec.config == {"topic": "t"}
    assert spec.idempotency_key is None


def test_idempotency_key_templates() -> None:
    specs = plan(
        defs(
            {"type": "a", "idempotency_key": "{data.message_id}"},
            {"type": "b", "idempotency_key": "{event.data.message_id}:{task_type}"},
            {"type": "c", "idempotency_key": "{activity_id}/{event_id}/{index}", "count": 2},
        ),
        RUN,
    )
    assert [s.idempotency_key for s in specs] == [
        "m-1", "m-1:b", f"{ACT}/evt-1/2", f"{ACT}/evt-1/3",
    ]  # fmt: skip


def test_cron_context_has_nominal_time_and_window() -> None:
    ctx = trigger_context(CRON)
    assert ctx["scheduled_for"] == "2026-03-01T09:00:00+00:00"
    assert ctx["event"] == {} and ctx["event_id"] is None
    (spec,) = plan(defs({"type": "noop", "idempotency_key": "{scheduled_for}"}), CRON)
    assert spec.idempotency_key == "2026-03-01T09:00:00+00:00"
    assert spec.payload["event"] is None
    assert spec.payload["trigger"]["context_window_start"] == "2026-03-01T08:00:00+00:00"


def test_missing_template_field_fails_the_plan_naming_it() -> None:
    with pytest.raises(PlanError, match=r"tasks\[1\] \(emit\).*data\.nope"):
        plan(defs({"type": "noop"}, {"type": "emit", "idempotency_key": "{data.nope}"}), RUN)


def test_bad_retry_config_fails_the_plan_naming_the_key() -> None:
    with pytest.raises(PlanError, match=r"config\.max_attempts"):
        plan(defs({"type": "noop", "config": {"max_attempts": 0}}), RUN)


def test_handler_options_defaults_and_overrides() -> None:
    o = handler_options({})
    assert (o.max_attempts, o.timeout_seconds, o.heartbeat_timeout_seconds) == (5, 300.0, 60.0)
    o = handler_options({"max_attempts": 2, "retry_initial_seconds": 0.5})
    assert (o.max_attempts, o.retry_initial_seconds) == (2, 0.5)
    for bad in ({"max_attempts": 1.5}, {"timeout_seconds": "x"}, {"max_attempts": True},
                {"retry_initial_seconds": 10, "retry_max_interval_seconds": 1}):  # fmt: skip
        with pytest.raises(ValueError, match="config"):
            handler_options(bad)
