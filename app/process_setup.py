"""What every long-running ``ingest`` process sets up before it runs: its logs, its tracing and
its allocator's trim (``ingress``, ``router``, ``worker``, ``relay``, ``ops``).

One call, so a new long-running command gets all three and a new process-wide concern is added
in one place. ``ingest replay`` is a one-shot command and sets up its logs and tracing itself.
"""

from __future__ import annotations

from pipeline import logs, memory, tracing
from pipeline.settings import Settings


def setup(cfg: Settings, process: str) -> None:
    """Logs (level and format), tracing and ``malloc_trim`` on a timer, from ``cfg.process``;
    ``process`` names the service in log lines, spans and the trim's metric."""
    p = cfg.process
    logs.setup(p.log_level, p.log_format, process)
    tracing.setup(p.tracing, process)
    memory.setup(p.malloc_trim_seconds, process)
