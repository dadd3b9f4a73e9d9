"""The stack's Jaeger (``ingest stack up --tracing``) as pure logic: settings, the flag,
the config it runs with, its command line, the build, and the real server's OTEL
environment (stack/devstack/jaeger.py). No network, no Jaeger."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from devstack import jaeger, manager, temporal_build
from devstack.jaeger import Jaeger, build_steps, command, config, server_otel_env
from devstack.procs import StackError
from devstack.settings import StackSettings

from app.cli import main
from tests.support import ROOT


def _cfg(tmp: Path | None = None, **kw: object) -> StackSettings:
    return StackSettings(dir=tmp or Path("/nonexistent"), **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("INGEST_STACK_"):
            monkeypatch.delenv(key)


def test_defaults_are_the_documented_ones() -> None:
    cfg = _cfg()
    assert cfg.tracing is False
    assert (cfg.jaeger_version, cfg.jaeger_cache) == ("1.75.0", Path("~/.cache/ingest/jaeger"))
    assert (cfg.jaeger_otlp_grpc_port, cfg.jaeger_otlp_http_port) == (4317, 4318)
    assert (cfg.jaeger_ui_port, cfg.jaeger_query_grpc_port) == (16686, 16685)


def test_settings_come_from_ingest_stack_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_STACK_TRACING", "1")
    monkeypatch.setenv("INGEST_STACK_JAEGER_UI_PORT", "26686")
    monkeypatch.setenv("INGEST_STACK_JAEGER_CACHE", "/tmp/j")
    cfg = _cfg()
    assert cfg.tracing and cfg.jaeger_ui_port == 26686 and cfg.jaeger_cache == Path("/tmp/j")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("INGEST_STACK_JAEGER_VERSION", "latest"), ("INGEST_STACK_JAEGER_OTLP_GRPC_PORT", "70000")],
)
def test_a_bad_value_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    from pipeline.settings import ConfigError, build

    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        build(StackSettings)


def _endpoints(tree: Any) -> list[str]:
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k == "endpoint"] + [
            e for v in tree.values() for e in _endpoints(v)
        ]
    if isinstance(tree, list):
        return [e for v in tree for e in _endpoints(v)]
    return []


def test_config_listens_on_loopback_on_the_four_configured_ports_only() -> None:
    cfg = _cfg(
        jaeger_otlp_grpc_port=1001,
        jaeger_otlp_http_port=1002,
        jaeger_ui_port=1003,
        jaeger_query_grpc_port=1004,
    )
    conf = config(cfg)
    assert sorted(_endpoints(conf)) == [f"127.0.0.1:{p}" for p in (1001, 1002, 1003, 1004)]
    otlp = conf["receivers"]["otlp"]["protocols"]  # type: ignore[index]
    assert otlp == {"grpc": {"endpoint": "127.0.0.1:1001"}, "http": {"endpoint": "127.0.0.1:1002"}}
    assert list(conf["receivers"]) == ["otlp"]  # type: ignore[call-overload]
    # No Prometheus endpoint of its own (else :8888 on every stack).
    assert conf["service"]["telemetry"]["metrics"] == {"level": "none"}  # type: ignore[index]


def test_config_keeps_spans_in_memory_and_queries_that_store() -> None:
    conf: Any = config(_cfg())
    (store,) = conf["extensions"]["jaeger_storage"]["backends"].items()
    assert list(store[1]) == ["memory"]
    assert conf["extensions"]["jaeger_query"]["storage"] == {"traces": store[0]}
    assert conf["exporters"]["jaeger_storage_exporter"] == {"trace_storage": store[0]}
    pipeline = conf["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    assert pipeline["exporters"] == ["jaeger_storage_exporter"]
    assert set(conf["service"]["extensions"]) == set(conf["extensions"])
    assert "ui" not in conf["extensions"]["jaeger_query"]


def test_ui_assets_are_passed_when_set(tmp_path: Path) -> None:
    conf: Any = config(_cfg(jaeger_ui_assets=tmp_path))
    assert conf["extensions"]["jaeger_query"]["ui"] == {"assets_path": str(tmp_path)}


def test_command_line_is_the_binary_and_its_config() -> None:
    assert command(Path("/c/jaeger"), Path("/s/jaeger/config.yaml")) == [
        "/c/jaeger",
        "--config",
        "/s/jaeger/config.yaml",
    ]


def test_build_is_a_throwaway_module_with_jaeger_as_a_tool() -> None:
    out = Path("/c/v1.75.0/jaeger.partial")
    assert build_steps("1.75.0", out) == [
        ["mod", "init", "ingest-jaeger-build"],
        ["get", "-tool", "github.com/jaegertracing/jaeger/cmd/jaeger@v1.75.0"],
        ["build", "-o", str(out), "github.com/jaegertracing/jaeger/cmd/jaeger"],
    ]


def _fake_go(tmp_path: Path, fail_on: str = "") -> tuple[Path, Path]:
    """A `go` that logs each call (cwd, args, GOTOOLCHAIN) and writes `build -o OUT`."""
    calls = tmp_path / "calls.txt"
    go = tmp_path / "go"
    go.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = version ]; then echo "go version go1.26.8 linux/amd64"; exit 0; fi\n'
        f'echo "$PWD|$*|$GOTOOLCHAIN|$CGO_ENABLED" >> {calls}\n'
        f'if [ "$1" = "{fail_on}" ]; then echo "go: module lookup disabled" >&2; exit 1; fi\n'
        'if [ "$1" = build ]; then echo binary > "$3"; fi\n'
    )
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return go, calls


def test_ensure_builds_once_into_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go, calls = _fake_go(tmp_path)
    monkeypatch.setattr(temporal_build, "find_go", lambda: str(go))
    binary = jaeger.ensure_jaeger(tmp_path / "cache", "1.75.0", log=tmp_path / "build.log")
    home = (tmp_path / "cache" / "v1.75.0").resolve()
    assert binary == home / "jaeger" and binary.read_text() == "binary\n"
    lines = [ln.split("|") for ln in calls.read_text().splitlines()]
    assert [ln[0] for ln in lines] == [str(home / "module")] * 3  # all in the throwaway module
    assert [ln[1].split()[0] for ln in lines] == ["mod", "get", "build"]
    assert {(ln[2], ln[3]) for ln in lines} == {("local", "0")}
    assert not (home / "module").exists() and not (home / "jaeger.partial").exists()
    assert "$ go get -tool" in (tmp_path / "build.log").read_text()

    monkeypatch.setattr(temporal_build, "find_go", lambda: pytest.fail("built again"))
    assert jaeger.ensure_jaeger(tmp_path / "cache", "1.75.0") == binary


def test_a_failed_build_is_one_line_and_leaves_no_binary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    go, _ = _fake_go(tmp_path, fail_on="get")
    monkeypatch.setattr(temporal_build, "find_go", lambda: str(go))
    with pytest.raises(StackError) as err:
        jaeger.ensure_jaeger(tmp_path / "cache", "1.75.0")
    line = str(err.value)
    assert "\n" not in line
    assert "go get -tool" in line and "Go 1.26.8" in line and "module lookup disabled" in line
    assert not (tmp_path / "cache" / "v1.75.0" / "jaeger").exists()


def test_no_go_is_one_line_saying_how_to_do_without(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(temporal_build, "find_go", lambda: None)
    with pytest.raises(StackError, match=r"needs Go .*INGEST_STACK_TRACING") as err:
        jaeger.ensure_jaeger(tmp_path, "1.75.0")
    assert "\n" not in str(err.value)


def test_the_real_server_gets_otlp_grpc_variables_only_with_tracing() -> None:
    assert server_otel_env(_cfg()) == {}
    env = server_otel_env(_cfg(tracing=True, jaeger_otlp_grpc_port=14317))
    assert env["OTEL_TRACES_EXPORTER"] == "otlp"
    # go.temporal.io/server 1.31 refuses any other protocol (common/telemetry/env.go).
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "grpc"
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://127.0.0.1:14317"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:14317"


def test_pipeline_env_points_at_the_otlp_http_port() -> None:
    env = jaeger.pipeline_env(_cfg(jaeger_otlp_http_port=14318))
    assert env == {"INGEST_TRACING": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:14318"}
    line = manager.traces_line(_cfg(jaeger_otlp_http_port=14318, jaeger_ui_port=26686))
    assert "http://127.0.0.1:26686" in line and "OTEL_EXPORTER_OTLP_ENDPOINT=" in line


def _exec_done(pid: int) -> None:
    """Wait (at most 5 s) until process ``pid`` runs ``sleep``, no longer the forked python."""
    import time

    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
        assert time.monotonic() < deadline, f"pid {pid} never exec'd sleep"
        time.sleep(0.01)


def test_exports_traces_reads_the_process_environment() -> None:
    with_otlp = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "OTEL_TRACES_EXPORTER": "otlp"}
    )
    plain = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]})
    try:
        # Until a child has exec'd, /proc/<pid>/environ is its forked parent's (a CI run
        # under load read it there): wait for the exec, then read.
        for p in (with_otlp, plain):
            _exec_done(p.pid)
        assert jaeger.exports_traces(with_otlp.pid)
        assert not jaeger.exports_traces(plain.pid)
    finally:
        for p in (with_otlp, plain):
            p.kill()
            p.wait()


def test_up_names_a_running_temporal_started_without_tracing(tmp_path: Path) -> None:
    from devstack.temporal import Temporal

    (tmp_path / "run").mkdir()
    plain = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]})
    traced = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, **server_otel_env(_cfg(tracing=True))}
    )
    try:
        for p in (plain, traced):
            _exec_done(p.pid)
        temporal = Temporal(_cfg(tmp_path, tracing=True))
        temporal.proc.pidfile.write_text(str(plain.pid))
        note = manager.untraced_server_note(temporal)
        assert note is not None and "without tracing" in note and "\n" not in note
        temporal.proc.pidfile.write_text(str(traced.pid))
        assert manager.untraced_server_note(temporal) is None
    finally:
        for p in (plain, traced):
            p.kill()
            p.wait()


def test_jaeger_is_a_service_only_with_tracing_or_when_started(tmp_path: Path) -> None:
    names = [n for n, _ in manager._services(_cfg(tmp_path))]
    assert "jaeger" not in names
    # First: the real server exports to it from its start.
    assert next(n for n, _ in manager._services(_cfg(tmp_path, tracing=True))) == "jaeger"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "jaeger.pid").write_text(str(os.getpid()))  # "running"
    assert "jaeger" in [n for n, _ in manager._services(_cfg(tmp_path))]


def test_down_names_jaeger_only_when_it_stopped_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    stopped: list[str] = []

    def not_running(self: Jaeger) -> bool:
        stopped.append("jaeger")
        return False

    monkeypatch.setattr(Jaeger, "stop", not_running)
    assert manager.down(_cfg(tmp_path)) == 0
    assert stopped == ["jaeger"] and "jaeger" not in capsys.readouterr().out
    monkeypatch.setattr(Jaeger, "stop", lambda self: True)
    manager.down(_cfg(tmp_path))
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split() == ["jaeger", "stopped"]  # last: the servers flush spans first


@pytest.mark.parametrize(("argv", "tracing"), [(["--tracing"], True), ([], None)])
def test_the_tracing_flag_reaches_the_manager(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], tracing: bool | None
) -> None:
    seen: dict[str, object] = {}

    def fake_run(*args: object, **kw: object) -> int:
        seen.update(kw, action=args[0])
        return 0

    monkeypatch.setattr(manager, "run", fake_run)
    assert main(["stack", "up", *argv]) == 0
    assert seen == {"action": "up", "tracing": tracing, "proxied": False}


@pytest.mark.parametrize(
    ("flag", "env", "on"), [(True, "", True), (None, "1", True), (None, "", False)]
)
def test_flag_or_variable_turns_tracing_on(
    monkeypatch: pytest.MonkeyPatch, flag: bool | None, env: str, on: bool
) -> None:
    if env:
        monkeypatch.setenv("INGEST_STACK_TRACING", env)
    seen: list[StackSettings] = []

    def status(cfg: StackSettings) -> int:
        seen.append(cfg)
        return 0

    monkeypatch.setattr(manager, "status", status)
    assert manager.run("status", tracing=flag) == 0
    assert seen[0].tracing is on


def test_make_run_turns_tracing_on_only_with_tracing_1() -> None:
    def dry(*args: str) -> str:
        res = subprocess.run(
            ["make", "-n", "--no-print-directory", "-C", str(ROOT), "run", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return res.stdout

    plain, traced = dry(), dry("TRACING=1")
    assert "INGEST_TRACING" not in plain and "16686" not in plain
    assert plain.splitlines()[-1].endswith("ingest run --seed-demo")
    run_line = traced.splitlines()[-1]
    assert run_line.startswith("INGEST_TRACING=1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:")
    assert "${INGEST_STACK_JAEGER_OTLP_HTTP_PORT:-4318}" in run_line
    assert "${INGEST_STACK_JAEGER_UI_PORT:-16686}" in traced
