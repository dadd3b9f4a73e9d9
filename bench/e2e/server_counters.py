"""What a phase of bench.e2e costs the Temporal server, from the server's own counters.

Read before and after each phase, as deltas:

* ``state_transitions``: observations of the history service's
  ``state_transition_count`` histogram in the benchmark's namespace. The history
  service records it once per persisted mutable-state write (create, update,
  conflict-resolve), each write being one state transition, so the histogram's
  ``_count`` counts transitions (its ``_sum`` adds up running totals and is not used);
* ``persistence_requests``: the ``persistence_requests`` counter of every service,
  for the benchmark's namespace and for the shard- and queue-level requests that
  carry no namespace (``_unknown_``); other namespaces' requests are left out (the
  dev server is shared with the test runs);
* ``visibility_requests``: ``visibility_persistence_requests`` (no namespace label);
* ``pg_transactions``: ``xact_commit + xact_rollback`` of the server's two
  PostgreSQL databases (``pg_stat_database``; real server only: the dev server
  keeps its state in SQLite).

Every process of the server is scraped (the split shape has five). PostgreSQL
publishes a backend's counts at most once a second and the server's metrics
reporter flushes every second, so :meth:`ServerCounters.read` waits ``settle``
seconds first. A counter that a scrape does not show is missing, never 0: its
delta is left out, and the report says so.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import asyncpg

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
# the namespace label of requests that belong to no namespace (shards, task queues)
NO_NAMESPACE = ("_unknown_", "")

SERIES = {  # figure -> metric name
    "state_transitions": "state_transition_count_count",
    "persistence_requests": "persistence_requests",
    "visibility_requests": "visibility_persistence_requests",
}


def parse_metrics(text: str, namespace: str) -> dict[str, float]:
    """The figures of one scrape (Prometheus text format); a figure whose metric is
    absent from ``text`` is absent from the result."""
    out: dict[str, float] = {}
    wanted = {metric: figure for figure, metric in SERIES.items()}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None or m["name"] not in wanted:
            continue
        figure = wanted[m["name"]]
        labels = dict(_LABEL.findall(m["labels"] or ""))
        ns = labels.get("namespace", "")
        mine = ns == namespace or (figure == "persistence_requests" and ns in NO_NAMESPACE)
        if figure != "visibility_requests" and not mine:
            continue
        out[figure] = out.get(figure, 0.0) + float(m["value"])
    return out


def merged(scrapes: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Figures summed over the server's processes."""
    out: dict[str, float] = {}
    for scrape in scrapes:
        for k, v in scrape.items():
            out[k] = out.get(k, 0.0) + v
    return out


def per_run(
    before: Mapping[str, float], after: Mapping[str, float], runs: float
) -> dict[str, float | None]:
    """Each figure's delta per run; ``None`` where either reading lacks it."""
    figures = [*SERIES, "pg_transactions"]
    return {
        k: round((after[k] - before[k]) / runs, 1) if k in before and k in after else None
        for k in figures
    }


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


@dataclass(frozen=True)
class ServerCounters:
    """The counters of one Temporal server: its metrics URLs and its PostgreSQL databases."""

    metrics_urls: Sequence[str]
    namespace: str
    pg_url: str | None = None  # an admin connection to the server's PostgreSQL
    databases: Sequence[str] = ()
    settle: float = 1.5

    async def read(self) -> dict[str, float]:
        await asyncio.sleep(self.settle)
        texts = await asyncio.gather(*(asyncio.to_thread(_scrape, u) for u in self.metrics_urls))
        out = merged(parse_metrics(t, self.namespace) for t in texts)
        if self.pg_url is not None and self.databases:
            conn = await asyncpg.connect(self.pg_url)
            try:
                rows = await conn.fetch(
                    "SELECT datname, xact_commit + xact_rollback AS n FROM pg_stat_database"
                    " WHERE datname = ANY($1::text[])",
                    list(self.databases),
                )
            finally:
                await conn.close()
            if len(rows) == len(self.databases):
                out["pg_transactions"] = float(sum(r["n"] for r in rows))
        return out
