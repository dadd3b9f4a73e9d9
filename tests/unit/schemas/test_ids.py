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


def test_uuid5_formatting_covers_every_variant_digit():
    # The version and variant bits are set on the hex string: every value of the
    # variant digit (16 of them, over enough coordinates) must match uuid.uuid5.
    ns = uuid.UUID("0b6b9d0e-7f54-5d3c-8a8e-2f4c3d1e9a77")
    seen = set()
    for off in range(2000):
        name = f"raw/{off % 3}/{off}"
        want = str(uuid.uuid5(ns, name))
        assert ids.source_event_id("raw", off % 3, off) == want
        assert ids.source_event_id_of(name.encode()) == want
        seen.add(ids.hashlib.sha1(ns.bytes + name.encode()).hexdigest()[16])
    assert len(seen) == 16


def test_source_event_ids_are_the_ones_already_issued():
    # Literal ids minted before the hot-path rewrite: a stamped id must never change.
    assert ids.source_event_id("raw", 0, 0) == "208b3077-0bcf-512f-b835-24ed3b48153e"
    assert ids.source_event_id("ingest.raw", 5, 123456789) == "93e99fbd-0b0f-551e-9b12-354ca0116553"
    assert ids.source_event_id("é-topic", 1, 2**40) == "37f33806-478a-5816-a7bc-2517503bfade"
    assert ids.source_event_id("bench-raw-x", 2, 29999) == "8528db0a-c24b-5e30-bccd-85954ea87e1e"
