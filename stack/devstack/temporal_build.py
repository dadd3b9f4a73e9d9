"""The real Temporal server's binaries, built once with ``go install`` into a cache.

``temporal server start-dev`` is one process, one history shard and SQLite. The
server that users deploy is ``go.temporal.io/server``: this module builds its
``server`` binary and its ``sql`` schema tool (``temporal-sql-tool``) at the pinned
version (``INGEST_STACK_TEMPORAL_SERVER_VERSION``) into
``INGEST_STACK_TEMPORAL_SERVER_CACHE/<version>/`` (outside the checkout, so every
clone and every CI run on the machine reuses one build; about 5 to 6 minutes on two
cores the first time, and 1.5 GB of Go module cache).

``GOTOOLCHAIN=local``: the build uses the Go that is installed, never one fetched on
the fly, so a Go that is too old for the pinned version fails with one line naming
both versions instead of quietly building with another toolchain. :func:`run_go` and
:func:`require_go` are shared with :mod:`devstack.jaeger`, which builds Jaeger the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devstack.procs import StackError

MODULE = "go.temporal.io/server"
# The two commands of the module the stack runs: the server, and the schema tool.
COMMANDS = {"server": "cmd/server", "sql": "cmd/tools/sql"}
# The Temporal UI's server, with the web assets embedded in its module.
UI_MODULE = "github.com/temporalio/ui-server/v2/cmd/server"
# Where the machine's Go usually lives when it is not on PATH.
GO_FALLBACKS = ("/usr/local/go/bin/go",)


@dataclass(frozen=True)
class ServerBinaries:
    server: Path
    sql: Path
    version: str


def find_go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return next((p for p in GO_FALLBACKS if os.access(p, os.X_OK)), None)


def go_version(go: str) -> tuple[int, ...]:
    """``(1, 26, 8)`` from ``go version go1.26.8 linux/amd64``."""
    out = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"go(\d+)\.(\d+)(?:\.(\d+))?", out)
    if m is None:
        raise StackError(f"could not read the Go version from {go!r}: {out.strip()!r}")
    return tuple(int(x) for x in m.groups(default="0"))


def _one_line(text: str) -> str:
    """The line of ``go``'s output that says what went wrong."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "requires go" in ln or "go.mod requires" in ln:
            return ln
    return lines[-1] if lines else "no output"


def ensure_binaries(cache: Path, version: str, log: Path | None = None) -> ServerBinaries:
    """The cached binaries of ``version``, building the missing ones first.

    Raises :class:`StackError` with one line when Go is missing or the build fails.
    """
    home = cache.expanduser().resolve() / f"v{version}"
    targets = {name: f"{MODULE}/{cmd}@v{version}" for name, cmd in COMMANDS.items()}
    built = _ensure(home, targets, f"the Temporal server {version}", log)
    return ServerBinaries(server=built["server"], sql=built["sql"], version=version)


def ensure_ui(cache: Path, version: str, log: Path | None = None) -> Path:
    """The Temporal UI server (``temporalio/ui-server``, its web assets embedded) of
    ``version``, built once like the server; its own folder (both binaries are `server`)."""
    home = cache.expanduser().resolve() / f"ui-v{version}"
    built = _ensure(home, {"server": f"{UI_MODULE}@v{version}"}, f"the Temporal UI {version}", log)
    return built["server"]


def _ensure(home: Path, targets: dict[str, str], what: str, log: Path | None) -> dict[str, Path]:
    """``{name: binary}`` of ``targets`` (``{name: module/cmd@version}``) under ``home``."""
    want = {name: home / name for name in targets}
    missing = [name for name, path in want.items() if not path.exists()]
    if missing:
        go = require_go(
            f"building {what}",
            "the version its go.mod names, 1.26 for server 1.31.x",
            "or use the dev server (INGEST_STACK_TEMPORAL=dev)",
        )
        home.mkdir(parents=True, exist_ok=True)
        for name in missing:
            started = time.monotonic()
            target = targets[name]
            print(f"temporal  building {target} with {go} (once; can take minutes)", flush=True)
            run_go(go, ["install", target], log=log, env={"GOBIN": str(home)})
            took = time.monotonic() - started
            print(f"temporal  built {target} in {took:.0f} s into {home}", flush=True)
    return want


def require_go(doing: str, which: str, otherwise: str) -> str:
    """The machine's Go, or :class:`StackError`: "``doing`` needs Go (``which``) on PATH; ..."."""
    go = find_go()
    if go is None:
        raise StackError(f"{doing} needs Go ({which}) on PATH; install it, {otherwise}")
    return go


def run_go(
    go: str,
    args: list[str],
    *,
    log: Path | None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    """``go ARGS`` with the installed toolchain only (``GOTOOLCHAIN=local``, no cgo), its
    output appended to ``log``; a failure raises :class:`StackError` with its one line."""
    full_env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", **(env or {})}
    res = subprocess.run(
        [go, *args], capture_output=True, text=True, env=full_env, cwd=cwd, check=False
    )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as f:
            f.write(f"$ go {' '.join(args)}\n{res.stdout}{res.stderr}\n")
    if res.returncode != 0:
        have = ".".join(map(str, go_version(go)))
        raise StackError(
            f"go {' '.join(args)} failed with Go {have}: {_one_line(res.stderr or res.stdout)}"
        )
