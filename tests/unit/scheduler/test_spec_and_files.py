"""Activity -> Schedule mapping, fingerprints, and activity-file errors that name the field."""

from __future__ import annotations

import uuid
from datetime import timedelta

import orjson
import pytest
from temporalio.client import ScheduleActionStartWorkflow, ScheduleOverlapPolicy

from definitions import files
from scheduler import spec
from schemas.definitions import ActivityDef, CronTrigger
from schemas.ids import dispatcher_workflow_id, schedule_id

AID = uuid.UUID("550e8400-e29b-41d4-a716-446655440000")


def act(**trigger: object) -> ActivityDef:
    return ActivityDef.model_validate(
        {"id": AID, "name": "r", "trigger": {"type": "cron", "cron": "0 * * * *", **trigger}}
    )


def test_schedule_for_each_policy() -> None:
    for policy, overlap in [("skip", ScheduleOverlapPolicy.SKIP),
                            ("catchup", ScheduleOverlapPolicy.ALLOW_ALL),
                            ("compress", ScheduleOverlapPolicy.SKIP)]:  # fmt: skip
        s = spec.build_schedule(act(misfire_policy=policy, timezone="Europe/Paris",
                                    jitter_seconds=30), "tq", paused=False)  # fmt: skip
        assert s.policy.overlap == overlap
        assert s.policy.catchup_window == spec.CATCHUP_WINDOW
        assert s.spec.cron_expressions == ["0 * * * *"]
        assert s.spec.time_zone_name == "Europe/Paris"
        assert s.spec.jitter == timedelta(seconds=30)
        assert isinstance(s.action, ScheduleActionStartWorkflow)
        assert (s.action.workflow, s.action.id, s.action.task_queue) == (
            "CronFireWorkflow", f"cron-fire-{AID}", "tq")  # fmt: skip
    assert schedule_id(AID) == f"activity-schedule-{AID}"


def test_interval_spec_and_paused_state() -> None:
    s = spec.build_schedule(act(interval_seconds=2), "tq", paused=True)
    assert [i.every for i in s.spec.intervals] == [timedelta(seconds=2)]
    assert not s.spec.cron_expressions
    assert s.state.paused and s.state.note == spec.DISABLED_NOTE


def test_fingerprint_changes_with_the_trigger_and_queue_only() -> None:
    a = act().trigger
    assert isinstance(a, CronTrigger)
    assert spec.fingerprint(a, "tq") == spec.fingerprint(act().trigger, "tq")  # type: ignore[arg-type]
    assert spec.fingerprint(a, "tq") != spec.fingerprint(a, "other")
    b = act(misfire_policy="compress").trigger
    assert spec.fingerprint(a, "tq") != spec.fingerprint(b, "tq")  # type: ignore[arg-type]


def test_dispatcher_workflow_id_is_temporals_naming() -> None:
    from datetime import UTC, datetime

    t = datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert dispatcher_workflow_id(str(AID), t) == f"cron-fire-{AID}-2026-03-01T09:00:00Z"


def _file(**cron: object) -> str:
    return orjson.dumps({"activities": [
        {"id": str(uuid.uuid4()), "name": "e", "trigger": {"type": "event", "event_type": "x"}},
        {"id": str(AID), "name": "c", "trigger": {"type": "cron", "cron": "0 * * * *", **cron}},
    ]}).decode()  # fmt: skip


def test_errors_name_the_field_path() -> None:
    with pytest.raises(files.FileError) as e:
        files.parse(_file(misfire_policy="sometimes", timezone="Mars/Olympus"), ".json")
    assert any(p.startswith("activities[1].trigger.misfire_policy: Input should be")
               for p in e.value.problems)  # fmt: skip
    assert any(p.startswith("activities[1].trigger.timezone: ") for p in e.value.problems)


def test_yaml_and_duplicates() -> None:
    text = f"activities:\n- {{id: '{AID}', name: a, trigger: {{type: event, event_type: x}}}}\n"
    assert files.parse(text, ".yaml").activities[0].id == AID
    with pytest.raises(files.FileError) as e:
        files.parse(text.replace("activities:\n", "activities:\n") + text.split("\n", 1)[1],
                    ".yml")  # fmt: skip
    assert e.value.problems == ["activities[1].id: duplicate of activities[0].id"]
    with pytest.raises(files.FileError, match="not valid YAML"):
        files.parse("activities: [", ".yaml")


def test_field_path_rendering() -> None:
    assert files.field_path(("activities", 1, "trigger", "cron", "misfire_policy")) == (
        "activities[1].trigger.misfire_policy"
    )
    assert files.field_path(("activities", 0, "tasks", 2, "type")) == "activities[0].tasks[2].type"
    assert files.field_path(()) == "(file)"
