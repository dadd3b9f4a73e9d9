"""pipeline.retry: the one capped backoff of the service loops."""

from __future__ import annotations

from itertools import islice

from pipeline.retry import BACKOFF_INITIAL, BACKOFF_MAX, backoff


def test_backoff_doubles_from_initial_up_to_the_cap() -> None:
    assert list(islice(backoff(), 8)) == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
    assert (BACKOFF_INITIAL, BACKOFF_MAX) == (0.2, 10.0)


def test_backoff_takes_its_own_bounds() -> None:
    assert list(islice(backoff(0.1, 0.3), 4)) == [0.1, 0.2, 0.3, 0.3]
