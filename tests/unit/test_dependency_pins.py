"""temporalio is pinned to the minor release the suite was run on (pyproject.toml).

workers/sandbox.py relies on how the SDK holds its in-sandbox workflow instance
(with a fallback); a new minor release must be tested before the pin is raised.
This fails when the installed temporalio is outside the pinned range, or when the
range allows a minor release newer than the installed one (an untested one).
"""

from __future__ import annotations

import tomllib

import temporalio
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support import ROOT


def _pinned(name: str) -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    found = [Requirement(d) for d in deps if Requirement(d).name == name]
    assert len(found) == 1, deps
    return found[0]


def test_temporalio_is_pinned_to_the_installed_minor() -> None:
    spec = _pinned("temporalio").specifier
    installed = Version(temporalio.__version__)
    assert installed in spec, f"temporalio {installed} is outside the pinned {spec}"
    next_minor = Version(f"{installed.major}.{installed.minor + 1}.0")
    assert next_minor not in spec, f"{spec} allows {next_minor}, which was not tested"
    assert Version("1.23.99") not in spec, "StorageDriverStoreContext first ships in 1.24"
