"""Every YAML and JSON file under ``deploy/`` parses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.deploy.assets import (
    DEPLOY,
    _load_all,
    _yaml_files,
)


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    assert _load_all(path), f"{path} is empty"


@pytest.mark.parametrize(
    "path", sorted(DEPLOY.rglob("*.json")), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_json_parses(path: Path) -> None:
    assert json.loads(path.read_text())
