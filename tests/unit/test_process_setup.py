"""app.process_setup: one call gives a long-running process its logs, tracing and trim."""

from __future__ import annotations

import pytest

from app import process_setup
from pipeline import settings


def test_setup_configures_logs_tracing_and_the_trim_for_the_named_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, tuple[object, ...]]] = []
    for module, name in (
        (process_setup.logs, "logs"),
        (process_setup.tracing, "tracing"),
        (process_setup.memory, "memory"),
    ):
        monkeypatch.setattr(module, "setup", lambda *a, _n=name: calls.append((_n, a)))
    monkeypatch.setenv("INGEST_MALLOC_TRIM_SECONDS", "7")
    monkeypatch.setenv("INGEST_LOG_LEVEL", "DEBUG")
    cfg = settings.load_settings("relay")
    process_setup.setup(cfg, "relay")
    assert [n for n, _ in calls] == ["logs", "tracing", "memory"]
    assert calls[0][1] == ("DEBUG", cfg.process.log_format, "relay")
    assert calls[1][1] == (cfg.process.tracing, "relay")
    assert calls[2][1] == (7.0, "relay")


@pytest.mark.parametrize("command", ["ingress", "router", "worker", "relay", "ops"])
def test_every_long_running_command_sets_up_through_it(command: str) -> None:
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(f"app.commands.{command}"))
    assert f'process_setup.setup(cfg, "{command}")' in source
