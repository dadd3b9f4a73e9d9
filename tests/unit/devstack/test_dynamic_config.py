"""INGEST_STACK_TEMPORAL_DYNAMIC_CONFIG: KEY=VALUE pairs for the dev server, checked up front."""

from __future__ import annotations

import pytest
from devstack.settings import StackSettings
from pydantic import ValidationError

KEY = "limit.historyCount.suggestContinueAsNew"


def test_pairs_come_from_the_environment_as_a_json_list(monkeypatch):
    monkeypatch.setenv("INGEST_STACK_TEMPORAL_DYNAMIC_CONFIG", f'["{KEY}=40", "x.y=\\"a\\""]')
    assert StackSettings().temporal_dynamic_config == (f"{KEY}=40", 'x.y="a"')


@pytest.mark.parametrize(
    ("pair", "says"),
    [(KEY, "is not KEY=VALUE"), ("=40", "is not KEY=VALUE"), ("x.y=abc", "must be JSON")],
)
def test_a_bad_pair_is_refused_naming_it(pair, says):
    with pytest.raises(ValidationError, match=says) as err:
        StackSettings(temporal_dynamic_config=(pair,))
    assert "temporal_dynamic_config" in str(err.value) and repr(pair) in str(err.value)
