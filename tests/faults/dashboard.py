"""What the Grafana dashboard shows during a broker failover, sampled from the processes.

Once a second, the series behind the dashboard's panels are scraped from the
ingress and router ``/metrics`` endpoints and appended to ``dashboard.csv`` in
the test's tmp dir (``t`` is seconds since the sampling began; ``fault`` marks
the samples taken while a broker was down or restarting). The figures
summarise it: the peak consumer lag of each, and the longest time the router's
"Starts /s" panel sat at zero while its lag was above zero.

These are observations for docs/kafka.md, not assertions: a sample the
process does not answer in time is skipped (the row is left out), never read
as zero.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.faults import harness as h

# column -> (process kind, metric, labels): the panels an operator looks at.
SERIES: dict[str, tuple[str, str, dict[str, str]]] = {
    "ingress_lag": ("ingress", "pipeline_consumer_lag", {"component": "ingress"}),
    "router_lag": ("router", "pipeline_consumer_lag", {"component": "router"}),
    "ingested": ("ingress", "pipeline_events_consumed_total", {"component": "ingress"}),
    "started": ("router", "pipeline_workflows_started_total", {}),
    "suppressed": ("router", "pipeline_duplicates_suppressed_total", {"component": "router"}),
    "start_errors": ("router", "pipeline_start_errors_total", {}),
    "dlq": ("ingress", "pipeline_dlq_messages_total", {}),
}


class Dashboard:
    def __init__(self, children: dict[str, h.Child], path: Path) -> None:
        self.children = children
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.fault = False  # set by the scenario while a broker is down or restarting
        self._t0 = time.monotonic()

    def mark(self, what: str) -> None:
        """A fault action, with its wall-clock time, in ``faults.log`` next to the CSV."""
        with self.path.with_name("faults.log").open("a") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {what}\n")

    async def run(self) -> None:
        with self.path.open("w") as out:
            out.write(",".join(["t", "fault", *SERIES]) + "\n")
            while True:
                t = time.monotonic() - self._t0
                try:
                    row = {"t": round(t, 1), "fault": int(self.fault)}
                    for col, (kind, metric, labels) in SERIES.items():
                        row[col] = await self.children[kind].metric(metric, **labels)
                except Exception:
                    row = {}  # a busy process: skip this sample
                if row:
                    self.rows.append(row)
                    out.write(",".join(str(row[c]) for c in ["t", "fault", *SERIES]) + "\n")
                    out.flush()
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - self._t0 - t)))

    def figures(self) -> dict[str, Any]:
        if not self.rows:
            return {"dashboard": "no samples"}
        zero, longest, prev = 0.0, 0.0, self.rows[0]
        for row in self.rows[1:]:
            if row["started"] == prev["started"] and row["router_lag"] > 0:
                zero += row["t"] - prev["t"]
                longest = max(longest, zero)
            else:
                zero = 0.0
            prev = row
        return {
            "router_lag_peak": int(max(r["router_lag"] for r in self.rows)),
            "ingress_lag_peak": int(max(r["ingress_lag"] for r in self.rows)),
            "starts_flat_s": round(longest),
            "start_errors": int(self.rows[-1]["start_errors"]),
        }
