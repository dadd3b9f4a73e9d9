"""bench.common's closed loop: a steady number in flight, every index run once."""

from __future__ import annotations

import asyncio

from bench.common import closed_loop, steady_rate


async def test_closed_loop_keeps_in_flight_and_runs_each_once() -> None:
    running, peak, seen = 0, 0, []

    async def one(i: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (i % 3))
        seen.append(i)
        running -= 1

    finishes = await closed_loop(50, 8, one)
    assert sorted(seen) == list(range(50))
    assert peak == 8
    assert len(finishes) == 50 and finishes == sorted(finishes)


async def test_closed_loop_with_fewer_runs_than_lanes() -> None:
    seen: list[int] = []

    async def one(i: int) -> None:
        seen.append(i)

    assert len(await closed_loop(3, 64, one)) == 3
    assert sorted(seen) == [0, 1, 2]


def test_steady_rate_leaves_out_ramp_and_drain() -> None:
    # 10 finishes per second in the middle, a slow start and a slow end
    finishes = [0.0, 5.0] + [5.0 + 0.1 * i for i in range(1, 17)] + [20.0, 30.0]
    assert round(steady_rate(finishes), 6) == 10.0
    assert round(steady_rate([0.0, 1.0, 2.0]), 6) == 1.0
