"""tests.soak.memreport: each probe row names the fault that had last begun, from the same
``faults.log`` reader as ``tests.soak.rescore`` (a log over midnight included)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from tests.soak import memreport


def _at(clock: str, day: str = "2026-12-06") -> float:
    return datetime.fromisoformat(f"{day}T{clock}").timestamp()


def test_rows_name_the_last_fault_begun_across_midnight(tmp_path: Path, capsys) -> None:
    probe = tmp_path / "memprobe-worker.jsonl"
    rows = [
        {"t": _at("23:58:00"), "pid": 7, "rss": 120e6, "py_arenas": 40},
        {"t": _at("23:59:30"), "pid": 7, "rss": 135e6, "py_arenas": 47},
        {"t": _at("00:01:30", "2026-12-07"), "pid": 7, "rss": 136e6, "py_arenas": 47},
        {"t": _at("00:02:00", "2026-12-07"), "pid": 7, "error": "ValueError()"},
    ]
    probe.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    log = tmp_path / "faults.log"
    log.write_text(
        "23:59:00 begin net_latency\n23:59:59 end net_latency {}\n"
        "00:01:00 begin kill_relay\n00:01:02 end kill_relay {}\n"
    )
    assert memreport.main([str(probe), str(log)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("| ") and "pid" not in line]
    assert table[0].startswith("| 23:58:00 | 7 |"), table[0]  # the clock of faults.log
    assert table[0].endswith("|  |"), table[0]  # before any fault
    assert table[1].endswith("| net_latency |"), table[1]
    # 00:01:30 is after kill_relay's begin on the next day, not before 23:59:00
    assert table[2].endswith("| kill_relay |"), table[2]
    assert "| 120.0 | 40 |" in table[0]
    assert table[3] == "| error | 7 | ValueError() |"
