"""The Grafana dashboard: shape, panels, provisioning."""

from __future__ import annotations

import pytest
import yaml

from tests.unit.deploy.assets import (
    DEPLOY,
    _compose,
    _dashboard,
    _dashboard_exprs,
    _panels,
)


def test_dashboard_shape() -> None:
    dash = _dashboard()
    assert dash["uid"] and dash["title"]
    assert 36 <= dash["schemaVersion"] <= 41
    var = {v["name"]: v for v in dash["templating"]["list"]}["DS_PROMETHEUS"]
    assert var["type"] == "datasource" and var["query"] == "prometheus"
    panels = list(_panels(dash["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        here = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & here, f"panel {p['title']!r} overlaps another"
        cells |= here
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"].strip(), p["title"]


@pytest.mark.parametrize(
    "needle",
    [
        "rate(pipeline_events_consumed_total",
        "sum by (trigger) (rate(pipeline_workflows_started_total",
        "pipeline_duplicates_suppressed_total",
        "pipeline_dlq_messages_total",
        "sum by (component, topic, partition) (pipeline_consumer_lag)",
        "histogram_quantile(0.5, sum by (le) (rate(pipeline_start_latency_seconds_bucket",
        "histogram_quantile(0.99, sum by (le) (rate(pipeline_start_latency_seconds_bucket",
        "sum by (result) (rate(pipeline_runs_logged_total",
        "pipeline_task_instances_total",
        "sum by (policy) (increase(pipeline_misfires_total",
        "sum by (activity, task_type) (pipeline_tasks_pending_fix)",
        "sum by (action) (increase(pipeline_task_fixes_total",
        "pipeline_start_errors_total",
        "temporal_worker_task_slots_available",
        "temporal_workflow_task_schedule_to_start_latency_bucket",
        "temporal_activity_execution_failed",
        "temporal_local_activity_execution_failed",  # short handlers run as local activities
        "max by (activity) (pipeline_flow_slots_in_use)",
        "max by (activity) (pipeline_flow_runs_waiting)",
        "sum by (le, activity) (rate(pipeline_flow_wait_seconds_bucket",
        "max by (activity) (pipeline_flow_oldest_wait_seconds)",
    ],
)
def test_dashboard_has_panel_for(needle: str) -> None:
    assert any(needle in e for e in _dashboard_exprs()), f"no panel queries {needle}"


def test_grafana_provisioning_matches_dashboard_and_compose() -> None:
    prov = DEPLOY / "grafana" / "provisioning"
    (ds,) = yaml.safe_load((prov / "datasources" / "prometheus.yaml").read_text())["datasources"]
    var = {v["name"]: v for v in _dashboard()["templating"]["list"]}["DS_PROMETHEUS"]
    assert ds["type"] == "prometheus" and ds["uid"] == var["current"]["value"]
    assert ds["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((prov / "dashboards" / "ingest.yaml").read_text())["providers"]
    mounts = _compose()["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts
