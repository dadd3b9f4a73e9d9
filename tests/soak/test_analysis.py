"""The soak's arithmetic without a server: windows, RSS growth, p99 recovery, knobs."""

from __future__ import annotations

import os

import pytest

from tests.soak import knobs, report, rig
from tests.soak.analysis import (
    MB,
    Fault,
    ProcSample,
    Run,
    Sample,
    percentile,
    recovery,
    rss_growth,
    rss_steps,
    windows,
)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 99) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0
    assert percentile([5.0], 99) == 5.0


def test_windows_count_finished_runs_and_latency_of_the_runs_produced_in_them() -> None:
    runs = [
        Run("a", "plain", 1.0, 2.0, 3.0, True),
        Run("b", "plain", 11.0, 15.0, 16.0, True),
        Run("c", "batch", 12.0, 30.0, 31.0, False),  # finished in the 2nd, no latency
    ]
    samples = [
        Sample(1.0, {"worker": ProcSample(7, 100 * MB, 20)}, 4, {"router": 3}, {"router": 0.5}),
        Sample(6.0, {"worker": ProcSample(7, 110 * MB, 25)}, 6, {"router": 1}, {"router": 2.0}),
    ]
    rows = windows(0.0, 20.0, 10.0, runs, samples, [Fault("kill_worker", 12.0, 13.0)])
    assert [r["runs_per_s"] for r in rows] == [0.1, 0.1]
    first, second = rows
    assert (first["start_p50"], first["finish_p99"]) == (1.0, 2.0)
    assert (second["start_p99"], second["produced"]) == (4.0, 1)
    assert (first["rss_mb_worker"], first["fds_worker"], first["pg_connections"]) == (110.0, 25, 6)
    assert (first["lag_router"], first["lag_s_router"]) == (3, 2.0)
    assert (first["faults"], second["faults"]) == ("", "kill_worker")
    assert "rss_mb_worker" not in second  # no sample in it


def test_rss_growth_takes_each_kinds_longest_life_after_the_first_window() -> None:
    samples = [
        Sample(float(t), {"worker": ProcSample(1 if t < 500 else 2, (100 + t // 60) * MB, 10)})
        for t in range(0, 3600, 60)
    ]
    got = rss_growth(samples, after=300)["worker"]
    assert got["pid"] == 2  # lives 500..3540: longer than pid 1's 300..480
    assert got["mb_per_h"] == pytest.approx(60, abs=1)  # 1 MB a minute
    assert got["growth_mb"] == pytest.approx(50, abs=1)
    assert rss_growth(samples[:4], after=0)["worker"]["mb_per_h"] == pytest.approx(60, abs=1)
    # 60 s of life: too short to say (the default min_span is 120 s)
    assert rss_growth(samples[:2], after=0)["worker"]["mb_per_h"] is None


def test_rss_steps_tell_a_high_water_mark_from_a_leak_and_name_a_new_process() -> None:
    # The worker: 100 MB, a peak of 150 during the first fault (300..360), 120 after it,
    # 120 through the second (900..960) too; killed by the third (1500), its successor
    # at 90. The relay: +10 MB after every fault (a leak).
    def worker(t: int) -> ProcSample:
        if t >= 1500:
            return ProcSample(2, 90 * MB, 10)
        mb = 100 if t < 300 else 150 if t < 360 else 120
        return ProcSample(1, mb * MB, 10)

    def relay(t: int) -> ProcSample:
        return ProcSample(3, (50 + 10 * sum(t >= end for end in (360, 960, 1560))) * MB, 5)

    samples = [
        Sample(float(t), {"worker": worker(t), "relay": relay(t)}) for t in range(0, 2100, 10)
    ]
    faults = [Fault("net_latency", 300, 360), Fault("net_reset", 900, 960)]
    faults.append(Fault("kill_worker", 1500, 1560))
    first, second, third = rss_steps(samples, faults)
    assert first["kind"] == "net_latency"
    assert first["worker"] == {
        "before_mb": 100.0,
        "after_mb": 120.0,
        "step_mb": 20.0,
        "peak_mb": 150.0,
        "new_pid": False,
    }
    assert second["worker"]["step_mb"] == 0.0 and second["worker"]["peak_mb"] == 120.0
    assert (third["worker"]["step_mb"], third["worker"]["new_pid"]) == (-30.0, True)
    assert [r["relay"]["step_mb"] for r in (first, second, third)] == [10.0, 10.0, 10.0]
    assert report.step_rows([third])[0] == {
        "kind": "kill_worker",
        "worker": "120.0→90.0 (90.0) new",
        "relay": "70.0→80.0 (80.0)",
    }
    # nothing sampled after the last fault: no step, not a step of 0
    (alone,) = rss_steps(samples[:160], [Fault("kill_worker", 1500, 1560)])
    assert alone["worker"]["after_mb"] is None and alone["worker"]["step_mb"] is None


def test_recovery_finds_the_first_bin_back_within_twice_the_pre_fault_p99() -> None:
    # p99 1 s before the fault at 100..110; 10 s after it ends at 110 events wait 8 s,
    # then 1 s again from 140 on.
    points = [(float(t), 1.0) for t in range(40, 100)]
    points += [(float(t), 8.0) for t in range(110, 140)]
    points += [(float(t), 1.0) for t in range(140, 300)]
    fault = Fault("kill_router", 100.0, 110.0)
    (row,) = recovery([fault], points, end=300.0)
    assert (row["pre_p99"], row["target"], row["peak_p99"]) == (1.0, 2.0, 8.0)
    assert row["recovered_s"] == 30  # the bin [140, 155) is the first without an 8 s wait
    (never,) = recovery([fault], points[:60] + [(float(t), 9.0) for t in range(110, 300)], end=300)
    assert never["recovered_s"] is None and "unmeasured" not in never
    (late,) = recovery([Fault("net_latency", 290.0, 295.0)], points, end=300.0)
    assert late["unmeasured"]


def test_knobs_defaults_follow_the_length_of_the_run() -> None:
    full = knobs.load({})
    assert (full.minutes, full.fault_every, full.window, full.rate, full.full) == (
        60,
        300,
        300,
        None,
        True,
    )
    assert full.toxic_seconds == 60
    assert full.first_fault == 150  # faults at 150, 450, ..., 3450 s: one of each kind
    last = full.first_fault + (len(rig.ROTATION) - 1) * full.fault_every
    assert last + full.toxic_seconds + 30 <= full.seconds  # the soak's own cut-off
    short = knobs.load(
        {"SOAK_MINUTES": "5", "SOAK_RATE": "2.5", "SOAK_FAULTS": "kill_worker, pg_restart"}
    )
    assert (short.fault_every, short.window, short.rate, short.full) == (60, 60, 2.5, False)
    assert short.faults == ("kill_worker", "pg_restart") and short.toxic_seconds == 20
    assert short.first_fault == 60
    with pytest.raises(ValueError, match="SOAK_MINUTES"):
        knobs.load({"SOAK_MINUTES": "0"})


def test_the_memory_probe_is_for_the_kinds_named(tmp_path) -> None:
    k = knobs.load({"SOAK_MEMPROBE": "worker, router", "SOAK_MEMPROBE_FRAMES": "4"})
    env = rig.memprobe_env(k, tmp_path)
    assert sorted(env) == ["router", "worker"]
    assert env["worker"]["PYTHONPATH"].split(os.pathsep)[0] == str(rig.MEMPROBE)
    assert env["worker"]["MEMPROBE_OUT"] == str(tmp_path / "memprobe-worker.jsonl")
    assert env["worker"]["MEMPROBE_FRAMES"] == "4"
    assert rig.memprobe_env(knobs.load({}), tmp_path) == {}


def test_the_pipeline_env_knob_reads_name_value_pairs() -> None:
    k = knobs.load({"SOAK_PIPELINE_ENV": "INGEST_MAX_CACHED_WORKFLOWS=250, A=b=c"})
    assert k.pipeline_env == (("INGEST_MAX_CACHED_WORKFLOWS", "250"), ("A", "b=c"))
    with pytest.raises(ValueError, match="SOAK_PIPELINE_ENV"):
        knobs.load({"SOAK_PIPELINE_ENV": "INGEST_MAX_CACHED_WORKFLOWS"})
    with pytest.raises(ValueError, match=r"SOAK_PIPELINE_ENV: LD_PRELOAD names /nowhere/libx\.so"):
        knobs.load({"SOAK_PIPELINE_ENV": "LD_PRELOAD=/nowhere/libx.so,PYTHONMALLOC=malloc"})


def test_rss_growth_lets_a_successor_settle_for_its_own_first_window() -> None:
    # pid 1 flat at 100 MB until 1800 s; pid 2 from 1800 s: +30 MB in its first 5 minutes
    # (warming up), flat after.
    samples = [
        Sample(
            float(t),
            {"worker": ProcSample(1, 100 * MB, 10)}
            if t < 1800
            else {"worker": ProcSample(2, (100 + min(30, (t - 1800) // 10)) * MB, 10)},
        )
        for t in range(0, 3600 * 2, 60)
    ]
    got = rss_growth(samples, after=300, settle=300)["worker"]
    assert got["pid"] == 2
    assert got["mb_per_h"] == pytest.approx(0, abs=0.1)  # flat once settled
    assert got["mb_per_h_unsettled"] > 1  # its warm-up counted
    # The first process's own first window is the run's: settle counts from its birth.
    first = rss_growth(samples[:30], after=300, settle=300)["worker"]
    assert (first["pid"], first["span_min"]) == (1, 24.0)
