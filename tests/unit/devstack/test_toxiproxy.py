"""The stack's Toxiproxy as pure logic: settings, the build, its command line and
``ingest stack build --proxied`` (stack/devstack/toxiproxy.py). No network, no
Toxiproxy (tests/integration/test_toxiproxy_stack.py runs the real one)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from devstack import manager, temporal_build, toxiproxy
from devstack.procs import StackError
from devstack.settings import StackSettings
from devstack.toxiproxy import Toxiproxy, build_steps, command

from app.cli import main


def _cfg(tmp: Path | None = None, **kw: object) -> StackSettings:
    return StackSettings(dir=tmp or Path("/nonexistent"), **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("INGEST_STACK_"):
            monkeypatch.delenv(key)


def test_defaults_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _cfg()
    assert (cfg.toxiproxy_version, cfg.toxiproxy_port) == ("2.5.0", 8474)
    assert cfg.toxiproxy_cache == Path("~/.cache/ingest/toxiproxy")
    monkeypatch.setenv("INGEST_STACK_TOXIPROXY_PORT", "18474")
    assert Toxiproxy(_cfg()).url == "http://127.0.0.1:18474"


def test_it_is_built_with_go_install_and_its_version_stamped_in() -> None:
    assert build_steps("2.5.0") == [
        [
            "install",
            "-ldflags=-s -w -X github.com/Shopify/toxiproxy/v2.Version=v2.5.0",
            "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0",
        ]
    ]


def test_its_api_listens_on_loopback_only() -> None:
    assert command(Path("/c/toxiproxy-server"), 8474) == [
        "/c/toxiproxy-server",
        "-host",
        "127.0.0.1",
        "-port",
        "8474",
    ]


def _fake_go(tmp_path: Path, fail: bool = False) -> tuple[Path, Path]:
    """A `go` that logs each call (args, GOBIN, GOTOOLCHAIN) and installs `$GOBIN/server`."""
    calls = tmp_path / "calls.txt"
    go = tmp_path / "go"
    go.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = version ]; then echo "go version go1.26.8 linux/amd64"; exit 0; fi\n'
        f'echo "$*|$GOBIN|$GOTOOLCHAIN|$CGO_ENABLED" >> {calls}\n'
        + ('echo "go: module lookup disabled" >&2; exit 1\n' if fail else "")
        + 'echo binary > "$GOBIN/server"\n'
    )
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return go, calls


def test_ensure_builds_once_into_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go, calls = _fake_go(tmp_path)
    monkeypatch.setattr(temporal_build, "find_go", lambda: str(go))
    binary = toxiproxy.ensure_toxiproxy(tmp_path / "cache", "2.5.0", log=tmp_path / "build.log")
    home = (tmp_path / "cache" / "v2.5.0").resolve()
    assert binary == home / "toxiproxy-server" and binary.read_text() == "binary\n"
    (line,) = [ln.split("|") for ln in calls.read_text().splitlines()]
    assert line[0].startswith("install ") and line[0].endswith("/cmd/server@v2.5.0")
    assert (line[1], line[2], line[3]) == (str(home / "partial"), "local", "0")
    assert sorted(p.name for p in home.iterdir()) == [".build.lock", "toxiproxy-server"]
    assert "$ go install" in (tmp_path / "build.log").read_text()

    monkeypatch.setattr(temporal_build, "find_go", lambda: pytest.fail("built again"))
    assert toxiproxy.ensure_toxiproxy(tmp_path / "cache", "2.5.0") == binary


def test_a_failed_build_is_one_line_and_leaves_no_binary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    go, _ = _fake_go(tmp_path, fail=True)
    monkeypatch.setattr(temporal_build, "find_go", lambda: str(go))
    with pytest.raises(StackError) as err:
        toxiproxy.ensure_toxiproxy(tmp_path / "cache", "2.5.0")
    assert "\n" not in str(err.value) and "module lookup disabled" in str(err.value)
    assert not (tmp_path / "cache" / "v2.5.0" / "toxiproxy-server").exists()


def test_no_go_is_one_line_saying_how_to_do_without(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(temporal_build, "find_go", lambda: None)
    with pytest.raises(StackError, match=r"Toxiproxy 2.5.0 needs Go .*--proxied"):
        toxiproxy.ensure_toxiproxy(tmp_path, "2.5.0")


@pytest.mark.parametrize(("argv", "proxied"), [(["--proxied"], True), ([], False)])
def test_build_builds_toxiproxy_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    proxied: bool,
) -> None:
    built: list[str] = []

    def builds(name: str, result: object) -> object:
        def fake(self: object) -> object:
            built.append(name)
            return result

        return fake

    monkeypatch.setenv("INGEST_STACK_DIR", str(tmp_path))
    bins = temporal_build.ServerBinaries(tmp_path / "server", tmp_path / "sql", "1.31.2")
    monkeypatch.setattr(manager.TemporalServer, "binaries", builds("temporal", bins))
    monkeypatch.setattr(manager.Jaeger, "binary", builds("jaeger", tmp_path))
    monkeypatch.setattr(Toxiproxy, "binary", builds("toxiproxy", tmp_path))
    assert main(["stack", "build", *argv]) == 0
    assert built == ["temporal", "jaeger", *(["toxiproxy"] if proxied else [])]
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == built
