"""``make system-deps`` (deploy/local/system-deps.sh): installs only what is missing,
after one ``apt-get update``; without root or apt it stops with one line.

The script runs with a ``PATH`` of stubs only: the commands a test says are present,
and a fake ``apt-get`` that logs its calls and "installs" a package by creating the
commands it provides. ``id`` is a stub too, so the root path runs without root; the
real no-root path runs as ``nobody`` when the suite runs as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = ROOT / "deploy" / "local" / "system-deps.sh"
EVERYTHING = ("java", "mvn", "chromium", "chromedriver", "prometheus", "promtool")
PROVIDES = {  # what each package installs, for the fake apt-get
    "openjdk-17-jre-headless": "java",
    "maven": "mvn",
    "chromium": "chromium",
    "chromium-driver": "chromedriver",
    "prometheus": "prometheus promtool",
    "docker-compose": "docker-compose",
    "python3-venv": "python",  # the stub python then has ensurepip
}

FAKE_APT = """echo "$*" >> {log}
[ "$1" = install ] || exit 0
for pkg in "$@"; do
  case "$pkg" in -*|install) continue ;; {fail}) exit 100 ;; esac
  case "$pkg" in
{cases}
  esac
done
"""


def _stub(bin_dir: Path, name: str, body: str = "exit 0") -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _machine(
    tmp: Path, present: tuple[str, ...], uid: int = 0, apt: bool = True, fail: str = "_none_"
) -> tuple[dict[str, str], Path]:
    """A PATH holding ``present``, a stub ``id -u`` answering ``uid``, and (``apt``) a fake
    apt-get failing on package ``fail``; the environment, and apt-get's call log."""
    bin_dir, log = tmp / "bin", tmp / "apt.log"
    bin_dir.mkdir()
    for name in present:
        _stub(bin_dir, name)
    _stub(bin_dir, "id", f"echo {uid}")
    _stub(bin_dir, "python", "exit 0")  # has ensurepip
    if apt:
        cases = "\n".join(
            f"    {pkg}) for c in {cmds}; do echo '#!/bin/bash' > {bin_dir}/$c;"
            f" /bin/chmod +x {bin_dir}/$c; done ;;"
            for pkg, cmds in PROVIDES.items()
        )
        _stub(bin_dir, "apt-get", FAKE_APT.format(log=log, fail=fail, cases=cases))
    return {"PATH": str(bin_dir), "PYTHON": str(bin_dir / "python")}, log


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_nothing_missing_runs_no_apt(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, EVERYTHING)
    out = _run(env)
    assert out.returncode == 0 and out.stdout == out.stderr == ""
    assert _calls(log) == []


def test_root_installs_only_what_is_missing_after_one_update(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, ("java", "mvn", "prometheus"), fail="docker-compose")
    assert not shutil.which("promtool", path=env["PATH"])
    out = _run(env)
    assert out.returncode == 0, out.stderr
    calls = _calls(log)
    assert calls[0] == "update -qq" and calls.count("update -qq") == 1
    # promtool was missing, prometheus was not: the package comes once, with the rest;
    # the optional package rides along.
    assert calls[1:] == [
        "install -y -qq --no-install-recommends chromium chromium-driver prometheus",
        "install -y -qq --no-install-recommends docker-compose",
    ]
    # The optional package failed to install: said, and not fatal.
    assert "optional package docker-compose could not be installed" in out.stdout
    for name in EVERYTHING:
        assert shutil.which(name, path=env["PATH"]), name


def test_python_without_venv_gets_python3_venv(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, EVERYTHING + ("docker-compose",))
    _stub(Path(env["PATH"]), "python", "exit 1")  # `import ensurepip` fails
    assert _run(env).returncode == 0
    assert [c for c in _calls(log) if c.startswith("install")] == [
        "install -y -qq --no-install-recommends python3-venv"
    ]


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_without_root_stops_with_one_line_naming_what_and_how(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, ("java", "mvn", "prometheus"), uid=1000)
    line = _one_line(_run(env))
    assert line == (
        "make system-deps: missing chromium chromedriver promtool; as root run: apt-get update"
        " && apt-get install -y --no-install-recommends chromium chromium-driver prometheus"
    )
    assert _calls(log) == []


def test_without_apt_names_the_packages(tmp_path: Path) -> None:
    env, _ = _machine(tmp_path, EVERYTHING[1:], apt=False)
    line = _one_line(_run(env))
    assert line.startswith("make system-deps: missing java;")
    assert "openjdk-17-jre-headless with this system's package manager" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the script as nobody, which needs root")
def test_as_nobody_for_real() -> None:
    """The real ``id`` and ``apt-get``, as a user that cannot install anything."""
    with tempfile.TemporaryDirectory() as tmp:  # pytest's tmp_path is root's alone
        Path(tmp).chmod(0o755)
        env, _ = _machine(Path(tmp), ("java", "mvn"), apt=False)
        bin_dir = Path(env["PATH"])
        (bin_dir / "id").unlink()
        for tool in ("id", "apt-get"):
            (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
        out = subprocess.run(
            ["runuser", "-u", "nobody", "--", "env", f"PATH={bin_dir}",
             f"PYTHON={env['PYTHON']}", "/bin/bash", str(SCRIPT)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert _one_line(out) == (
        "make system-deps: missing chromium chromedriver prometheus promtool; as root run:"
        " apt-get update && apt-get install -y --no-install-recommends chromium"
        " chromium-driver prometheus"
    )


def _dry_run(target: str) -> list[str]:
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if not line.startswith("make")]


@pytest.mark.parametrize("target", ["run", "test"])
def test_make_run_and_test_install_system_packages_first(target: str) -> None:
    assert "deploy/local/system-deps.sh" in _dry_run(target)[0]


def test_ci_runs_the_readme_test_command_and_installs_nothing_itself() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert "make test" in commands
    assert "apt-get" not in text
