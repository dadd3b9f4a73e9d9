"""deploy/README.md's alert table names every rule of deploy/prometheus/alerts.yml,
with the rule's own severity and runbook, and no rule that does not exist."""

from __future__ import annotations

import re

from tests.unit.deploy.assets import ROOT, _alert_rules

ROW = re.compile(r"^\| `(\w+)` \| .+ \| (\w+) \| `([^`]+)` \|$")


def _table() -> dict[str, tuple[str, str]]:
    text = (ROOT / "deploy" / "README.md").read_text()
    section = text.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines() if line.startswith("| `")]
    assert all(rows), (
        "a row of the alert table does not read | `name` | when | severity | `runbook` |"
    )
    return {m.group(1): (m.group(2), m.group(3)) for m in rows if m}


def test_every_alert_rule_is_in_the_deploy_readme() -> None:
    rules = {
        r["alert"]: (r["labels"]["severity"], r["annotations"]["runbook_url"])
        for r in _alert_rules()
    }
    table = _table()
    assert sorted(set(rules) - set(table)) == [], "alerts missing from deploy/README.md"
    assert sorted(set(table) - set(rules)) == [], "deploy/README.md lists alerts that do not exist"
    assert table == rules
