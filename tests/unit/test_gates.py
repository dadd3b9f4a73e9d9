"""The build's gates fail when they should: a skip under CI=true, an unknown marker."""

from __future__ import annotations

import pytest

from tests.support import ROOT

pytest_plugins = ["pytester"]

_SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is missing")

def test_runs():
    assert True
"""


@pytest.fixture
def gated(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(
        "from tests.support.ci_gate import pytest_runtest_makereport  # noqa: F401\n"
    )
    pytester.makepyfile(test_skipping=_SKIPPING)
    return pytester


def test_a_skip_fails_under_ci(gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = gated.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*skipped under CI=true*the tool is missing*"])


def test_a_skip_stays_a_skip_outside_ci(
    gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    gated.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1, skipped=1)


def test_an_unknown_marker_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.integratoin\ndef test_typo():\n    assert True\n"
    )
    # The project's own configuration (its addopts), not a flag given here.
    config = str(ROOT / "pyproject.toml")
    result = pytester.runpytest(
        "-c", config, "--rootdir", str(pytester.path), "-p", "no:cacheprovider"
    )
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'integratoin' not found in `markers` configuration option*"])


def test_pre_commit_runs_the_ruff_that_ci_runs() -> None:
    import importlib.metadata

    import yaml

    conf = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [h for repo in conf["repos"] for h in repo["hooks"]]
    assert {h["id"] for h in hooks} >= {"ruff", "ruff-format"}
    installed = importlib.metadata.version("ruff")
    for hook in hooks:
        assert hook["additional_dependencies"] == [f"ruff=={installed}"], hook["id"]
