"""The record generator alone (no stack): the same seed gives the same records, and the
CI batch tries every kind."""

from __future__ import annotations

from tests.fuzz.generate import generate
from tests.fuzz.strategies import KINDS, NEAR_LIMIT, UNIQ


def test_a_seed_gives_the_same_records_every_time():
    first, again, other = generate(7, 60), generate(7, 60), generate(8, 60)
    assert [(r.kind, r.key, r.value, r.headers) for r in first] == [
        (r.kind, r.key, r.value, r.headers) for r in again
    ]
    assert [r.value for r in first] != [r.value for r in other]


def test_the_ci_batch_tries_every_kind_with_unique_ids():
    batch = generate(34, 300)
    assert len(batch) == 300
    assert {r.kind for r in batch} == set(KINDS)
    assert not any(UNIQ.encode() in (r.value or b"") for r in batch)
    # at most about what a broker accepts (records it refuses are counted, not judged)
    assert max(len(r.value or b"") for r in batch) <= max(NEAR_LIMIT)
