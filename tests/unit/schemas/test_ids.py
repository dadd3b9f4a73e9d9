import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from schemas import ids

ACT = "550e8400-e29b-41d4-a716-446655440000"


def test_contract_examples_are_pinned():
    assert (
        ids.cron_workflow_id(ACT, datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
        == "activity-550e8400-e29b-41d4-a716-446655440000:2026-03-01T09:00:00+00:00"
    )
    assert (
        ids.event_workflow_id(ACT, "evt_abc123")
        == "activity-550e8400-e29b-41d4-a716-446655440000:evt_abc123"
    )


def test_cron_id_normalises_zone_and_microseconds():
    paris = timezone(timedelta(hours=1))
    t = datetime(2026, 3, 1, 10, 0, 0, 987654, tzinfo=paris)
    assert ids.cron_workflow_id(uuid.UUID(ACT), t).endswith(":2026-03-01T09:00:00+00:00")


def test_cron_id_refuses_naive_datetime():
    with pytest.raises(ValueError, match="timezone-aware"):
        ids.cron_workflow_id(ACT, datetime(2026, 3, 1, 9))


def test_task_and_permit_ids():
    assert ids.task_workflow_id("r1", "emit", 2) == "task-r1:emit:2"
    assert ids.permit_workflow_id("gpu-pool", "2") == "permit:gpu-pool:2"
    with pytest.raises(ValueError):
        ids.task_workflow_id("r1", "emit", -1)


def test_run_id_is_deterministic_and_distinct():
    a = ids.run_id_for("activity-x:e1")
    assert a == ids.run_id_for("activity-x:e1")
    assert a != ids.run_id_for("activity-x:e2")
    assert a.version == 5
    # Pinned value: if this changes, every replay would log a new run.
    assert str(a) == str(
        uuid.uuid5(uuid.UUID("6f1c1c6e-3b8e-5d8a-9c41-4b1f0e7a2d10"), "activity-x:e1")
    )


def test_source_and_content_event_ids_are_stable():
    assert ids.source_event_id("raw", 1, 42) == ids.source_event_id("raw", 1, 42)
    assert ids.source_event_id("raw", 1, 42) != ids.source_event_id("raw", 1, 43)
    assert ids.content_event_id(b"k", b"v") == ids.content_event_id(b"k", b"v")
    # key/value boundary is unambiguous
    assert ids.content_event_id(b"kv", b"") != ids.content_event_id(b"k", b"v")


def test_empty_parts_refused():
    with pytest.raises(ValueError):
        ids.event_workflow_id(ACT, "")


def test_fast_uuid5_matches_the_standard_library():
    ns = uuid.UUID("0b6b9d0e-7f54-5d3c-8a8e-2f4c3d1e9a77")
    for topic, part, off in [("raw", 0, 0), ("ingest.raw", 5, 123456789), ("é-topic", 1, 2**40)]:
        assert ids.source_event_id(topic, part, off) == str(uuid.uuid5(ns, f"{topic}/{part}/{off}"))
