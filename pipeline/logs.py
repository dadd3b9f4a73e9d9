"""Readable logs by default, one JSON object per line with INGEST_LOG_FORMAT=json."""

from __future__ import annotations

import logging
import sys

import orjson


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


def setup(level: str = "INFO", fmt: str = "text", component: str = "") -> None:
    handler = logging.StreamHandler(sys.stderr)
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
