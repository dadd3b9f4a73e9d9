"""Re-scoring a soak's folder: its samples and its fault log read back as the soak held them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from tests.soak import rescore
from tests.soak.analysis import MB


def test_faults_log_lines_pair_up_and_cross_midnight(tmp_path: Path) -> None:
    log = tmp_path / "faults.log"
    log.write_text(
        "23:58:00 begin net_latency\n"
        "23:59:01 end net_latency {'seconds': 60}\n"
        "00:03:00 begin kill_worker\n"
        "not a fault line\n"
        "00:03:01 end kill_worker {'pid': 7}\n"
        "00:08:00 begin pg_restart\n"  # the run stopped before its end
    )
    first = datetime(2026, 12, 6, 23, 50).timestamp()
    latency, kill, pg = rescore.load_faults(log, first)
    assert (latency.kind, latency.end - latency.start) == ("net_latency", 61)
    assert latency.start == datetime(2026, 12, 6, 23, 58).timestamp()
    assert kill.start == datetime(2026, 12, 7, 0, 3).timestamp()  # the next day
    assert (kill.end - kill.start, pg.end - pg.start) == (1, 0)


def test_samples_read_back_and_rescore_prints_both_figures(tmp_path: Path, capsys) -> None:
    t0 = datetime(2026, 12, 6, 12, 0).timestamp()
    with (tmp_path / "samples.jsonl").open("w") as out:
        for i in range(60):  # one a minute, the worker 1 MB more each minute
            procs = {"worker": {"pid": 5, "rss": (100 + i) * MB, "fds": 20}}
            row = {"t": t0 + 60 * i, "procs": procs, "pg_connections": 3, "lag": {}}
            out.write(json.dumps(row | {"lag_seconds": {}}) + "\n")
    (tmp_path / "faults.log").write_text("12:30:00 begin net_reset\n12:31:00 end net_reset {}\n")
    samples = rescore.load_samples(tmp_path / "samples.jsonl")
    assert (len(samples), samples[3].procs["worker"].rss, samples[3].pg_connections) == (
        60,
        103 * MB,
        3,
    )
    assert rescore.main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "worker   5    54.0      159.0   54.0       60.0" in printed
    # the medians of minutes 28-29 and 33-35 (2-4.5 min after the end), the peak up to 35
    (row,) = [line for line in printed.splitlines() if line.startswith("net_reset")]
    assert row.split()[1:] == ["128.5→134.0", "(135.0)"]


def test_runs_csv_reads_back_and_rescore_prints_each_recovery(tmp_path: Path, capsys) -> None:
    """runs.csv as the soak writes it: the recovery and the drain bins come out of it."""
    import dataclasses

    from tests.soak import report
    from tests.soak.analysis import Run

    t0 = datetime(2026, 12, 7, 3, 0).timestamp()
    runs = []
    for i in range(300):  # an event a second; those of 100-189 s wait for 190 s (a drain)
        produced = t0 + i
        wait = 190 - i + 0.2 if 100 <= i < 190 else 0.2
        runs.append(Run(f"w{i}", "plain", produced, produced + wait, produced + wait + 0.1, True))
    runs.append(Run("c1", "cron", None, t0 + 5, t0 + 6, False))  # no event: no latency
    report.write_csv(tmp_path / "runs.csv", [dataclasses.asdict(r) for r in runs])
    back = rescore.load_runs(tmp_path / "runs.csv")
    assert back == runs
    samples = [{"t": t0 + 60 * i, "procs": {}, "pg_connections": 1, "lag": {}} for i in range(6)]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (tmp_path / "faults.log").write_text("03:01:40 begin net_reset\n03:02:40 end net_reset {}\n")
    assert rescore.main([str(tmp_path), "--drain", "40"]) == 0
    printed = capsys.readouterr().out
    recovery, bins = printed.split("p99 produce-to-start recovery")[1].split("per 5-s bin")
    (row,) = [line for line in recovery.splitlines() if line.startswith("net_reset")]
    # pre 0.2 -> target 2 x the 0.5-s floor; the drain ends 30 s after the fault's end
    assert row.split() == ["net_reset", "0.2", "1.0", "30.2", "30"]
    (line,) = [line for line in bins.splitlines() if line.startswith("net_reset")]
    assert line.split()[1:] == ["30.2", "25.2", "20.2", "15.2", "10.2", "5.2", "0.2", "0.2"]
