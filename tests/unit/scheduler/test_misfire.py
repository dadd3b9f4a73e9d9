"""The policy decision for a gap of missed nominal times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.misfire import decide

H = timedelta(hours=1)
T = datetime(2026, 3, 1, 9, tzinfo=UTC)
LAST = T - 4 * H  # ran; T-3h, T-2h, T-1h were missed
MISSED = [T - 3 * H, T - 2 * H, T - H]


def test_no_gap_is_a_normal_one_interval_window() -> None:
    for policy in ("skip", "catchup", "compress"):
        d = decide(policy, T, T - H, T - H, [], 0, 10)
        assert (d.window_start, d.window_end, d.replay, d.misfires) == (T - H, T, [], 0)


def test_skip_discards_and_counts() -> None:
    d = decide("skip", T, T - H, LAST, MISSED, 3, 10)
    assert (d.window_start, d.replay, d.dropped, d.misfires) == (T - H, [], MISSED, 3)


@pytest.mark.parametrize(
    ("limit", "replay", "dropped"),
    [(10, MISSED, []), (3, MISSED, []), (2, MISSED[1:], MISSED[:1]), (1, MISSED[2:], MISSED[:2])],
)
def test_catchup_replays_the_latest_up_to_the_limit(limit, replay, dropped) -> None:
    d = decide("catchup", T, T - H, LAST, MISSED, 3, limit)
    assert (d.window_start, d.replay, d.dropped, d.misfires) == (T - H, replay, dropped, 3)


def test_compress_widens_the_window_to_the_last_run() -> None:
    d = decide("compress", T, T - H, LAST, MISSED, 3, 10)
    assert (d.window_start, d.window_end, d.replay, d.misfires) == (LAST, T, [], 3)


def test_huge_gap_counts_all_but_replays_only_the_limit() -> None:
    d = decide("catchup", T, T - H, LAST, MISSED, 5000, 2)
    assert d.misfires == 5000 and d.replay == MISSED[1:]


def test_unknown_policy() -> None:
    with pytest.raises(ValueError):
        decide("sometimes", T, T - H, LAST, MISSED, 3, 10)
