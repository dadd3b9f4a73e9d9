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


def test_cloudevent_ids_are_source_plus_id():
    assert ids.cloudevent_event_id("/a", "1") == ids.cloudevent_event_id("/a", "1")
    assert ids.cloudevent_event_id("/a", "1") != ids.cloudevent_event_id("/b", "1")
    assert ids.cloudevent_event_id("/a", "1") != ids.cloudevent_event_id("/a", "2")


def test_cloudevent_ids_split_source_and_id_unambiguously():
    # Every way of cutting the same characters into (source, id) is a different event,
    # whatever separator-like characters (or multi-byte ones) either side holds.
    pairs = [("a:b", "c"), ("a", "b:c"), ("ab", "c"), ("a", "bc"), ("1:a", "b"), ("1", ":ab")]
    pairs += [("é", "x"), ("\u00c3", "\u00a9x"), ("a\x00", "b"), ("a", "\x00b")]
    derived = {ids.cloudevent_event_id(s, i) for s, i in pairs}
    assert len(derived) == len(pairs)


def test_cloudevent_id_format_is_pinned():
    # The name hashed is "{UTF-8 byte length of source}:{source}{id}" under a fixed
    # namespace; if either changes, every CloudEvent replayed would start again.
    ns = uuid.UUID("d84fb428-9d54-474e-b269-98d5a98c8492")
    source, ce_id = "https://example.com/producer/é", "A234-1234-1234"
    want = uuid.uuid5(ns, f"{len(source.encode())}:{source}{ce_id}")
    assert ids.cloudevent_event_id(source, ce_id) == str(want)
    assert len(source.encode()) == len(source) + 1  # the length counts bytes, not characters
    assert ids.cloudevent_event_id("/orders", "ce-1") == "e5569cdf-5d24-5835-8833-1b22c7b6406f"
    assert ids.cloudevent_event_id(source, ce_id) == "b2d080d5-2ec7-5876-8037-b6f78db9ed45"


def test_cloudevent_id_is_bounded_and_refuses_empty_attributes():
    long_id = ids.cloudevent_event_id("s" * 5000, "i" * 100_000)
    assert len(long_id) == 36 and uuid.UUID(long_id).version == 5
    workflow_id = ids.event_workflow_id(ACT, long_id)
    assert len(workflow_id) == len(f"activity-{ACT}:") + 36
    for source, ce_id in [("", "1"), ("/a", "")]:
        with pytest.raises(ValueError):
            ids.cloudevent_event_id(source, ce_id)


def test_approval_notice_id_is_pinned():
    """The outbox id and ``notice_id`` header of an approval notice: never to change."""
    body = b'{"reminder":1}'
    assert (
        ids.approval_notice_id("task-x", "approval.reminder", body)
        == "task-x:approval.reminder:1c0b6e41ed13e6a26e5f077aa66362c5"
    )
    assert ids.approval_notice_id("task-x", "approval.reminder", b'{"reminder":2}') != (
        ids.approval_notice_id("task-x", "approval.reminder", body)
    )
    with pytest.raises(ValueError):
        ids.approval_notice_id("", "approval.reminder", body)
