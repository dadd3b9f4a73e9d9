"""The list of flow controls (schemas/flow/controls.py) agrees with the spec and the SQL.

A new control is added to ``CONTROLS`` and to ``FlowDef``; a gate control also
redefines ``flow_decide`` in a migration. These checks fail when one of the three
is forgotten, or when the gate's order in SQL and in ``CONTROLS`` part.
"""

from __future__ import annotations

import re

from schemas.flow.controls import CONTROLS, GATE_ORDER, SKIP_REASONS, Stage, declared
from schemas.flow.spec import FlowDef
from tests.support import ROOT

MIGRATIONS = ROOT / "schemas" / "migrations"
_COMMON = {"p_workflow_id", "p_activity", "p_event_id", "p_now"}


def _flow_decide() -> tuple[set[str], str]:
    """The parameters and the body of the latest definition of ``flow_decide``."""
    latest = None
    for path in sorted(MIGRATIONS.glob("*.sql")):
        for m in re.finditer(
            r"CREATE OR REPLACE FUNCTION flow_decide\((.*?)\).*?\$\$(.*?)\$\$",
            path.read_text(),
            re.S,
        ):
            latest = m
    assert latest is not None, "no migration defines flow_decide"
    params = {p.split()[0] for p in latest.group(1).replace("\n", " ").split(",") if p.strip()}
    return params, latest.group(2)


def test_every_field_of_the_flow_block_is_a_registered_control() -> None:
    assert [c.name for c in CONTROLS] != []
    assert {c.name for c in CONTROLS} == set(FlowDef.model_fields)
    assert len({c.name for c in CONTROLS}) == len(CONTROLS)


def test_gate_controls_are_flow_decide_parameter_groups_in_its_order() -> None:
    params, body = _flow_decide()
    gate = [c for c in CONTROLS if c.stage == Stage.GATE]
    assert [c.name for c in gate] == list(GATE_ORDER)
    prefixes = [c.sql_prefix for c in gate]
    assert all(prefixes), "every gate control names its flow_decide parameter prefix"
    grouped = {p for p in params if any(p.startswith(x) for x in prefixes if x)}
    assert params - _COMMON == grouped, "a flow_decide parameter that no gate control owns"
    first_use = [body.index(f"{c.sql_prefix}key") for c in gate]
    assert first_use == sorted(first_use), (
        f"CONTROLS lists the gate as {GATE_ORDER}; flow_decide applies another order"
    )
    assert not any(c.sql_prefix for c in CONTROLS if c.stage != Stage.GATE)


def test_skip_reasons_are_what_flow_decide_records() -> None:
    _, body = _flow_decide()
    recorded = set(re.findall(r"reason = '([a-z_]+)'", body))
    assert recorded == set(SKIP_REASONS) != set()


def test_declared_lists_a_flow_s_controls_of_one_stage() -> None:
    flow = FlowDef.model_validate(
        {
            "throttle": {"limit": 5, "period": "1s"},
            "singleton": {"mode": "skip"},
            "concurrency": {"limit": 2},
        }
    )
    assert declared(flow, Stage.GATE) == ["singleton", "throttle"]
    assert declared(flow, Stage.HOLD) == ["concurrency"]
    assert declared(flow, Stage.WINDOW) == []
    assert declared(None, Stage.GATE) == []
