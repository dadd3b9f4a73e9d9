"""Every benchmark entry point takes ``--help``: it prints a usage line, the environment
variables it reads, and exits 0 without running (``bench.cli.parse_args``).

Entry points are found, not listed: every module under ``bench/`` with a
``__main__`` block, and every package ``__main__.py``. So a new one that ignores
``--help`` fails here. The stack's addresses point nowhere, so an entry point that
starts its benchmark instead fails at once rather than loading the real stack.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

BENCH = ROOT / "bench"
NOWHERE = {
    "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    "TEMPORAL_ADDRESS": "127.0.0.1:1",
    "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none",
    "PATH": "/usr/bin:/bin",
    "PYTHONPATH": str(ROOT),
}


def _entry_points() -> list[Path]:
    return sorted(
        p
        for p in BENCH.rglob("*.py")
        if p.name == "__main__.py" or 'if __name__ == "__main__":' in p.read_text()
    )


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__main__" else parts)


def _reads(path: Path) -> set[str]:
    """The BENCH_* variables the entry point reads (a package's __main__: its siblings')."""
    files = [path] if path.name != "__main__.py" else list(path.parent.glob("*.py"))
    found: set[str] = set()
    for f in files:
        if f.name in ("profile.py", "runner_ab.py") and f != path:
            continue  # diagnostics with entry points of their own
        found |= set(re.findall(r'environ\.get\(\s*"(BENCH_[A-Z0-9_]+)"', f.read_text()))
    return found


def test_the_entry_points_are_found() -> None:
    mods = {_module(p) for p in _entry_points()}
    assert {"bench.run_all", "bench.e2e", "bench.ingress", "bench.plot"} <= mods, mods


@pytest.mark.parametrize("path", _entry_points(), ids=_module)
def test_help_prints_usage_and_exits_0_without_running(path: Path) -> None:
    mod = _module(path)
    out = subprocess.run(
        [sys.executable, "-m", mod, "--help"],
        cwd=ROOT,
        env=NOWHERE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith(f"usage: python -m {mod} "), out.stdout[:500]
    missing = {name for name in _reads(path) if name not in out.stdout}
    assert not missing, f"{mod} --help does not list {sorted(missing)}"
