"""Prometheus: scrape configs, alert rules and their runbook links, and ``promtool``
(Debian package ``prometheus``; without it those tests fail under CI=true, and are
skipped elsewhere, saying so: ``tests.support.prometheus.executable``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.prometheus import executable, promtool_with_kubernetes
from tests.unit.deploy.assets import (
    METRICS_PORT,
    PROM,
    ROOT,
    RUNBOOK_ANCHORS,
    SDK_METRICS_PORT,
    _alert_rules,
    _run,
)


def test_scrape_config_targets_every_process() -> None:
    cfg = yaml.safe_load((PROM / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    for component in ("ingress", "router", "worker"):
        (sd,) = jobs[f"ingest-{component}"]["dns_sd_configs"]
        assert sd["names"] == [component] and sd["port"] == METRICS_PORT
    (sd,) = jobs["temporal-sdk"]["dns_sd_configs"]
    assert sd["names"] == ["worker"] and sd["port"] == SDK_METRICS_PORT
    for rule_file in cfg["rule_files"]:
        assert (PROM / rule_file).is_file()


def test_every_alert_is_documented() -> None:
    rules = _alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for wanted in (
        "IngestConsumerLagGrowing",
        "IngestDeadLetters",
        "IngestStartErrors",
        "IngestNoProgress",
        "IngestMisfires",
    ):
        assert wanted in names
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        ann = rule["annotations"]
        assert ann["summary"].strip() and ann["description"].strip(), rule["alert"]
        anchor = re.fullmatch(r"[\w/.-]+\.md#([a-z0-9-]+)", ann["runbook_url"])
        assert anchor and anchor.group(1) in RUNBOOK_ANCHORS, ann["runbook_url"]


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lower-case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_runbook_anchors_exist_in_the_runbook() -> None:
    text = (ROOT / "docs" / "operating.md").read_text()
    anchors = {_slug(h) for h in re.findall(r"^#{2,4} (.+)$", text, re.M)}
    missing = RUNBOOK_ANCHORS - anchors
    assert not missing, f"docs/operating.md lacks runbook headings for {sorted(missing)}"


def test_runbook_links_resolve() -> None:
    """Every alert's runbook_url names a Markdown file of the repository and one of its headings."""
    for rule in _alert_rules():
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        doc = ROOT / path
        assert doc.is_file(), f"{rule['alert']}: {path} does not exist"
        anchors = {_slug(h) for h in re.findall(r"^#{2,4} (.+)$", doc.read_text(), re.M)}
        assert anchor in anchors, f"{rule['alert']}: {path} has no heading for #{anchor}"


def _promtool() -> str:
    return executable("promtool")


@pytest.mark.parametrize(
    "args",
    [
        ("check", "rules", "deploy/prometheus/alerts.yml"),
        ("check", "config", "deploy/prometheus/prometheus.yml"),
        ("test", "rules", "deploy/prometheus/alerts_test.yml"),
    ],
    ids=lambda a: " ".join(a[:2]) + " " + Path(a[2]).name,
)
def test_promtool(args: tuple[str, ...]) -> None:
    proc = _run(_promtool(), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_kubernetes_config() -> None:
    """prometheus-k8s.yml, checked by a promtool that knows kubernetes_sd_configs (Debian's
    does not: ``tests.support.prometheus.promtool_with_kubernetes``)."""
    proc = _run(
        promtool_with_kubernetes(), "check", "config", "deploy/prometheus/prometheus-k8s.yml"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kubernetes_sd_configs" in (ROOT / "deploy/prometheus/prometheus-k8s.yml").read_text()


def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    """promtool really fails on a bad expression (so a pass above means something)."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "groups:\n- name: x\n  rules:\n  - alert: X\n    expr: sum by (a (pipeline_consumer_lag)\n"
    )
    proc = _run(_promtool(), "check", "rules", str(bad))
    assert proc.returncode != 0
