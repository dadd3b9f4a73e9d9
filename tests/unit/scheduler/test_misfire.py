"""The policy decision for a gap of missed nominal times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.misfire import Gap, decide

H = timedelta(hours=1)
T = datetime(2026, 3, 1, 9, tzinfo=UTC)
LAST = T - 4 * H  # ran; T-3h, T-2h, T-1h were missed
MISSED = [T - 3 * H, T - 2 * H, T - H]


def test_no_gap_is_a_normal_one_interval_window() -> None:
    for policy in ("skip", "catchup", "compress"):
        d = decide(policy, T, Gap(T - H, T - H, [], 0), 10)
        assert (d.window_start, d.window_end, d.replay, d.misfires) == (T - H, T, [], 0)


def test_skip_discards_and_counts() -> None:
    d = decide("skip", T, Gap(T - H, LAST, MISSED, 3), 10)
    assert (d.window_start, d.replay, d.dropped, d.misfires) == (T - H, [], MISSED, 3)


@pytest.mark.parametrize(
    ("limit", "replay", "dropped"),
    [(10, MISSED, []), (3, MISSED, []), (2, MISSED[1:], MISSED[:1]), (1, MISSED[2:], MISSED[:2])],
)
def test_catchup_replays_the_latest_up_to_the_limit(limit, replay, dropped) -> None:
    d = decide("catchup", T, Gap(T - H, LAST, MISSED, 3), limit)
    assert (d.window_start, d.replay, d.dropped, d.misfires) == (T - H, replay, dropped, 3)


def test_compress_widens_the_window_to_the_last_run() -> None:
    d = decide("compress", T, Gap(T - H, LAST, MISSED, 3), 10)
    assert (d.window_start, d.window_end, d.replay, d.misfires) == (LAST, T, [], 3)


def test_huge_gap_counts_all_but_replays_only_the_limit() -> None:
    d = decide("catchup", T, Gap(T - H, LAST, MISSED, 5000), 2)
    assert d.misfires == 5000 and d.replay == MISSED[1:]


def test_unknown_policy() -> None:
    with pytest.raises(ValueError):
        decide("sometimes", T, Gap(T - H, LAST, MISSED, 3), 10)


# --- at resume (`ingest schedules resume --now`): M, the newest time, is itself missed.
M = T - H  # resumed between M and T: LAST ran, T-3h, T-2h and M were missed


def test_resume_skip_drops_the_whole_gap_and_runs_nothing() -> None:
    from scheduler.misfire import decide_at_resume

    d = decide_at_resume("skip", M, Gap(M - H, LAST, MISSED[:-1], 2), 10)
    assert (d.run, d.replay, d.misfires) == (False, [], 3)
    assert d.dropped == MISSED


def test_resume_catchup_runs_the_latest_limit_including_the_newest() -> None:
    from scheduler.misfire import decide_at_resume

    d = decide_at_resume("catchup", M, Gap(M - H, LAST, MISSED[:-1], 2), 2)
    assert d.run and (d.window_start, d.window_end) == (M - H, M)
    assert d.replay == [T - 2 * H], "M runs itself, one more is replayed: 2 in all"
    assert d.dropped == [T - 3 * H] and d.misfires == 3
    d = decide_at_resume("catchup", M, Gap(M - H, LAST, MISSED[:-1], 2), 1)
    assert d.run and d.replay == [] and d.dropped == MISSED[:-1]
    d = decide_at_resume("catchup", M, Gap(M - H, LAST, MISSED[:-1], 2), 10)
    assert d.replay == MISSED[:-1] and d.dropped == []


def test_resume_compress_runs_the_newest_once_over_the_whole_gap() -> None:
    from scheduler.misfire import decide_at_resume

    d = decide_at_resume("compress", M, Gap(M - H, LAST, MISSED[:-1], 2), 10)
    assert d.run and (d.window_start, d.window_end, d.replay) == (LAST, M, [])
    assert d.misfires == 3
