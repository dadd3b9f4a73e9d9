from hypothesis import given
from hypothesis import strategies as st

from pipeline.offsets import OffsetTracker, PartitionOffsets


def test_commit_stops_at_first_pending_offset():
    p = PartitionOffsets()
    for o in (10, 11, 12, 13):
        p.add(o)
    p.mark_done(10)
    p.mark_done(11)
    p.mark_done(13)
    assert p.committable() == 12
    p.advance(12)
    assert p.committable() is None
    p.mark_done(12)
    assert p.committable() == 14


def test_nothing_done_nothing_to_commit():
    p = PartitionOffsets()
    p.add(5)
    assert p.committable() is None


def test_gaps_in_fetched_offsets_do_not_block():
    p = PartitionOffsets()
    for o in (3, 7, 8):  # 4-6 compacted away / transaction markers
        p.add(o)
    p.mark_done(3)
    p.mark_done(7)
    assert p.committable() == 8


def test_refetched_offsets_are_ignored():
    p = PartitionOffsets()
    p.add(1)
    p.mark_done(1)
    p.add(1)  # seen again after a seek
    assert p.committable() == 2


def test_tracker_per_partition_and_forget():
    t = OffsetTracker()
    t.add("a", 0)
    t.add("b", 0)
    t.mark_done("a", 0)
    assert t.committable() == {"a": 1}
    assert t.in_flight == 1
    t.forget(["b"])
    assert t.in_flight == 0


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_committable_is_first_not_done(done_flags):
    p = PartitionOffsets()
    for o in range(len(done_flags)):
        p.add(100 + o)
    for o, done in enumerate(done_flags):
        if done:
            p.mark_done(100 + o)
    first_pending = next((i for i, d in enumerate(done_flags) if not d), len(done_flags))
    expected = None if first_pending == 0 else 100 + first_pending
    assert p.committable() == expected
