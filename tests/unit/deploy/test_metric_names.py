"""Every ``pipeline_*`` metric the dashboard and the alert rules name is defined in
``pipeline/metrics.py`` with the labels they use; the checker has its own negative tests."""

from __future__ import annotations

from tests.unit.deploy.assets import (
    _alert_rules,
    _dashboard_exprs,
    defined_metrics,
    metric_problems,
)


def test_metrics_module_is_parsed() -> None:
    metrics = defined_metrics()
    assert metrics["pipeline_events_consumed_total"] == ("Counter", {"component", "topic"})
    assert metrics["pipeline_start_latency_seconds"][0] == "Histogram"
    assert metrics["pipeline_consumer_lag"] == ("Gauge", {"component", "topic", "partition"})


def test_checker_rejects_wrong_names_and_labels() -> None:
    """The checker's own negative test: a typo or a wrong label must be reported."""
    good = (
        'sum by (component, topic) (rate(pipeline_events_consumed_total{component="router"}[5m]))'
        " + histogram_quantile(0.99, sum by (le) "
        "(rate(pipeline_start_latency_seconds_bucket[5m])))"
    )
    assert metric_problems(good) == []
    assert metric_problems("rate(pipeline_events_consumd_total[5m])") == [
        "unknown metric pipeline_events_consumd_total"
    ]
    # Buckets exist only for histograms; _total only for counters.
    assert metric_problems("pipeline_consumer_lag_bucket") == [
        "unknown metric pipeline_consumer_lag_bucket"
    ]
    assert metric_problems("pipeline_consumer_lag_total") != []
    assert metric_problems('pipeline_dlq_messages_total{reasn="x"}') == [
        "pipeline_dlq_messages_total has no label 'reasn'"
    ]
    assert metric_problems("sum by (reason) (rate(pipeline_workflows_started_total[5m]))") != []
    # temporal_* names are the SDK's: exempt, and they disable the grouping check.
    assert metric_problems("sum by (worker_type) (temporal_worker_task_slots_available)") == []


def test_dashboard_uses_only_defined_metrics_and_labels() -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 15
    problems = {e: p for e in exprs if (p := metric_problems(e))}
    assert problems == {}


def test_alert_rules_use_only_defined_metrics_and_labels() -> None:
    problems: dict[str, list[str]] = {}
    for rule in _alert_rules():
        texts = [rule["expr"], *rule.get("annotations", {}).values()]
        found = [p for t in texts for p in metric_problems(str(t))]
        if found:
            problems[rule["alert"]] = found
    assert problems == {}
