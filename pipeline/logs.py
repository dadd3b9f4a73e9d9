"""Readable logs by default, one JSON object per line with INGEST_LOG_FORMAT=json."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

import orjson

from pipeline import tracing


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if (ids := tracing.current_ids()) is not None:  # written inside a span
            doc["trace_id"], doc["span_id"] = ids
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


class RepeatThrottle(logging.Filter):
    """At most one aiokafka warning/error per message and node every ``window`` seconds.

    While a broker is down (a leader election, a rolling restart) aiokafka logs
    "Unable connect to node with id N" and "Failed fetch messages from N" at
    ERROR on every retry, ten times a second per client: about 200 lines per
    process per failover, which buries everything else. The first line of a
    kind goes out at once; repeats within the window are counted and the next
    one that goes out says how many were held back.
    """

    def __init__(self, window: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self.clock = clock
        self._seen: dict[tuple[str, str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith("aiokafka"):
            return True
        first = record.args[0] if isinstance(record.args, tuple) and record.args else ""
        key = (record.name, str(record.msg), str(first))
        now = self.clock()
        since, held = self._seen.get(key, (-self.window, 0))
        if now - since < self.window:
            self._seen[key] = (since, held + 1)
            return False
        if len(self._seen) > 1000:
            self._seen.clear()
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {self.window:.0f}s)"
        return True


def setup(level: str = "INFO", fmt: str = "text", component: str = "") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RepeatThrottle())
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        name = f"{component} " if component else ""
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)-5s {name}%(name)s: %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiokafka is chatty at INFO about group joins; keep it readable.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("temporalio").setLevel(max(logging.INFO, root.level))
