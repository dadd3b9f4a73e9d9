"""``ingest stack``: :mod:`pipeline.stack.manager`'s command, whose ``up`` also creates
the topic ``emit`` tasks publish to by default (a worker setting, so known here)."""

from __future__ import annotations

from pipeline.stack import manager


def _app_topics() -> list[str]:
    from workers.settings import load_worker_settings

    return [load_worker_settings().emit_topic]


COMMAND = manager.command(_app_topics)
