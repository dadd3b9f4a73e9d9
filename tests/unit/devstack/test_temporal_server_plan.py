"""The real Temporal server's stack mode, as pure logic: process plan, ports, config,
and the one line a missing or too-old Go gives (stack/devstack/temporal_*.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from devstack import temporal_build
from devstack.procs import StackError
from devstack.settings import StackSettings
from devstack.temporal_server import databases, grpc_port, plan, server_config


def _cfg(**kw: object) -> StackSettings:
    return StackSettings(dir=Path("/nonexistent"), temporal="server", **kw)  # type: ignore[arg-type]


def test_single_shape_is_one_process_with_every_service():
    (only,) = plan(_cfg())
    assert only.services == ("frontend", "history", "matching", "worker")
    assert grpc_port(_cfg(), only) == 7233


def test_split_shape_has_distinct_ports_and_history_first():
    cfg = _cfg(temporal_shape="split", temporal_history_hosts=3, temporal_port=20000)
    procs = plan(cfg)
    assert [p.name for p in procs] == [
        "temporal-history-1",
        "temporal-history-2",
        "temporal-history-3",
        "temporal-matching",
        "temporal-frontend",
        "temporal-worker",
    ]
    grpc = [grpc_port(cfg, p) for p in procs]
    membership = [g - 300 for g in grpc]
    metrics = [p.metrics_port for p in procs]
    every = grpc + membership + metrics + [20010]  # the frontend's HTTP port
    assert len(set(every)) == len(every), every
    assert grpc_port(cfg, procs[4]) == 20000  # the frontend on INGEST_STACK_TEMPORAL_PORT


def test_each_history_host_gets_its_own_ports_in_its_config():
    cfg = _cfg(temporal_shape="split", temporal_history_hosts=2)
    dyn = Path("/x/dynamic.yaml")
    confs = [
        server_config(cfg, p, "postgresql://postgres@127.0.0.1:5555/ingest", dyn) for p in plan(cfg)
    ]
    history = [c["services"]["history"]["rpc"]["grpcPort"] for c in confs[:2]]
    assert history == [7234, 7236]
    store = confs[0]["persistence"]["datastores"]["postgres-default"]["sql"]
    assert (store["connectAddr"], store["databaseName"], store["user"]) == (
        "127.0.0.1:5555",
        "temporal",
        "postgres",
    )
    assert confs[0]["persistence"]["numHistoryShards"] == 4
    assert confs[0]["dynamicConfigClient"]["filepath"] == str(dyn)


def test_database_names_follow_the_setting():
    assert list(databases(_cfg(temporal_database="t_bench"))) == ["t_bench", "t_bench_visibility"]


def test_no_go_gives_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(temporal_build, "find_go", lambda: None)
    with pytest.raises(StackError) as err:
        temporal_build.ensure_binaries(tmp_path, "1.31.2")
    line = str(err.value)
    assert "\n" not in line
    assert "needs Go" in line and "INGEST_STACK_TEMPORAL=dev" in line


def test_a_too_old_go_is_named_with_what_the_module_requires(monkeypatch, tmp_path):
    go = tmp_path / "go"
    go.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = version ]; then echo "go version go1.26.8 linux/amd64"; exit 0; fi\n'
        'echo "go: downloading go.temporal.io/server v1.31.5" >&2\n'
        'echo "go: go.temporal.io/server@v1.31.5 requires go >= 1.26.10 '
        '(running go 1.26.8; GOTOOLCHAIN=local)" >&2\n'
        "exit 1\n"
    )
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(temporal_build, "find_go", lambda: str(go))
    with pytest.raises(StackError) as err:
        temporal_build.ensure_binaries(tmp_path / "cache", "1.31.5")
    line = str(err.value)
    assert "\n" not in line
    assert "Go 1.26.8" in line and "requires go >= 1.26.10" in line


def test_cached_binaries_are_not_rebuilt(monkeypatch, tmp_path):
    home = tmp_path / "v1.31.2"
    home.mkdir()
    for name in ("server", "sql"):
        (home / name).write_text("")
    monkeypatch.setattr(temporal_build, "find_go", lambda: pytest.fail("built again"))
    bins = temporal_build.ensure_binaries(tmp_path, "1.31.2")
    assert (bins.server, bins.sql) == (home / "server", home / "sql")


def test_a_bad_version_or_shape_is_refused_naming_the_setting(monkeypatch):
    from pydantic import ValidationError

    monkeypatch.setenv("INGEST_STACK_TEMPORAL_SHAPE", "triple")
    with pytest.raises(ValidationError, match="temporal_shape"):
        StackSettings()


def test_dynamic_config_pairs_land_in_the_servers_file():
    from devstack.temporal_server import dynamic_config

    pairs = ("limit.historyCount.suggestContinueAsNew=40", 'frontend.namespaceRPS="x"')
    values = dynamic_config(_cfg(temporal_dynamic_config=pairs))
    assert values["limit.historyCount.suggestContinueAsNew"] == [{"value": 40}]
    assert values["frontend.namespaceRPS"] == [{"value": "x"}]
    assert values["system.forceSearchAttributesCacheRefreshOnRead"] == [{"value": True}]
