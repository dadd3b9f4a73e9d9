"""Checks on the deployment assets under ``deploy/``.

* Every file parses (YAML, JSON).
* Every ``pipeline_*`` metric named by the Grafana dashboard or the alert rules is
  defined in ``pipeline/metrics.py`` (histogram ``_bucket/_sum/_count`` series
  included), and every label they filter or group by exists on that metric.
  ``temporal_*`` names come from the Temporal SDK and are exempt. The checker has
  its own negative tests, so a wrong name really fails.
* ``promtool`` (Debian package ``prometheus``) checks the Prometheus config and
  rules and runs the alert unit tests in ``deploy/prometheus/alerts_test.yml``;
  without it those tests are skipped and say so.
* Kubernetes: probes on /healthz and /readyz (port 9400), resources, scrape
  annotations, replicas within the partition count, schema validation.
* Compose: services, image, env vars known to the settings classes.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
PROM = DEPLOY / "prometheus"
K8S = DEPLOY / "k8s"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "pipeline.json"
METRICS_PORT = 9400
SDK_METRICS_PORT = 9401

# Labels Prometheus attaches at scrape time (or our relabelling adds), valid on any series.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod"})
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Runbook anchors in the operating runbook (docs/operating.md) that alerts may link to.
RUNBOOK_ANCHORS = frozenset(
    {
        "lag-growing",
        "no-progress",
        "dlq-not-empty",
        "start-errors",
        "misfires",
        "process-down",
        "task-pending-fix",
        "replay-after-an-incident",
        "adding-partitions-or-replicas",
        "permits-saturated",
        "approvals-escalated",
    }
)


# --------------------------------------------------------------------------- loading


def _yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yml", ".yaml"))


def _load_all(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@cache
def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())  # type: ignore[no-any-return]


@cache
def _alert_rules() -> tuple[dict[str, Any], ...]:
    doc = yaml.safe_load((PROM / "alerts.yml").read_text())
    return tuple(rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule)


def _k8s_docs() -> list[tuple[Path, dict[str, Any]]]:
    return [
        (p, d)
        for p in sorted(K8S.glob("*.yaml"))
        if p.name != "kustomization.yaml"
        for d in _load_all(p)
    ]


def _k8s_kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _k8s_docs() if d["kind"] == kind]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _dashboard_exprs() -> list[str]:
    return [
        t["expr"]
        for p in _panels(_dashboard()["panels"])
        for t in p.get("targets", [])
        if t.get("expr")
    ]


# --------------------------------------------------------------- the metric checker


@cache
def defined_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """``{exported name: (kind, label names)}`` parsed from pipeline/metrics.py.

    Parsed, not imported, so the check needs no process-wide registry and sees
    exactly the literals the code passes to prometheus_client.
    """
    tree = ast.parse((ROOT / "pipeline" / "metrics.py").read_text())
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        kind = node.func.id
        if kind not in ("Counter", "Gauge", "Histogram", "Summary"):
            continue
        name = node.args[0]
        assert isinstance(name, ast.Constant) and isinstance(name.value, str)
        labels_node: ast.expr | None = node.args[2] if len(node.args) > 2 else None
        for kw in node.keywords:
            if kw.arg == "labelnames":
                labels_node = kw.value
        labels: frozenset[str] = frozenset()
        if labels_node is not None:
            value = ast.literal_eval(labels_node)
            labels = frozenset(value)
        exported = name.value
        if kind == "Counter" and not exported.endswith("_total"):
            exported += "_total"
        found[exported] = (kind, labels)
    return found


_METRIC_RE = re.compile(r"\bpipeline_[A-Za-z0-9_:]*")
_MATCHER_RE = re.compile(r"\b(pipeline_[A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_LABEL_IN_MATCHER_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING_RE = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def resolve_metric(
    series: str, metrics: dict[str, tuple[str, frozenset[str]]]
) -> tuple[str, str] | None:
    """``(defined name, suffix)`` for a series name, or None when it is not defined."""
    if series in metrics:
        return series, ""
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        kind = metrics.get(base, ("", frozenset()))[0]
        if base != series and (kind == "Histogram" or (kind == "Summary" and suffix != "_bucket")):
            return base, suffix
    return None


def metric_problems(
    text: str, metrics: dict[str, tuple[str, frozenset[str]]] | None = None
) -> list[str]:
    """Every problem with the ``pipeline_*`` names and labels used in ``text``.

    Unknown metric names anywhere in the text; unknown labels in ``{...}``
    matchers; and, when the expression uses only pipeline metrics, unknown
    labels in ``by (...)`` / ``without (...)`` clauses.
    """
    metrics = metrics if metrics is not None else defined_metrics()
    problems: list[str] = []
    referenced: list[tuple[str, str]] = []
    for series in _METRIC_RE.findall(text):
        resolved = resolve_metric(series, metrics)
        if resolved is None:
            problems.append(f"unknown metric {series}")
        else:
            referenced.append(resolved)
    for series, matchers in _MATCHER_RE.findall(text):
        resolved = resolve_metric(series, metrics)
        if resolved is None:
            continue
        base, suffix = resolved
        allowed = metrics[base][1] | TARGET_LABELS | ({"le"} if suffix == "_bucket" else set())
        for label in _LABEL_IN_MATCHER_RE.findall(matchers):
            if label not in allowed:
                problems.append(f"{series} has no label {label!r}")
    # Grouping labels: only checkable when every series in the text is ours.
    foreign = re.search(r"\b(temporal_[A-Za-z0-9_]*|up)\b", text)
    if referenced and not foreign:
        allowed = set(TARGET_LABELS)
        for base, suffix in referenced:
            allowed |= metrics[base][1]
            if suffix == "_bucket":
                allowed.add("le")
        for group in _GROUPING_RE.findall(text):
            for label in (x.strip() for x in group.split(",")):
                if label and label not in allowed:
                    problems.append(f"grouping label {label!r} is on none of {sorted(allowed)}")
    return problems


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


# ------------------------------------------------------------------------ parsing


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    assert _load_all(path), f"{path} is empty"


@pytest.mark.parametrize(
    "path", sorted(DEPLOY.rglob("*.json")), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_json_parses(path: Path) -> None:
    assert json.loads(path.read_text())


# ---------------------------------------------------------------------- dashboard


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


# -------------------------------------------------------------------- prometheus


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
        anchor = re.fullmatch(r"docs/operating\.md#([a-z0-9-]+)", ann["runbook_url"])
        assert anchor and anchor.group(1) in RUNBOOK_ANCHORS, ann["runbook_url"]


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lower-case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_runbook_anchors_exist_in_the_runbook() -> None:
    text = (ROOT / "docs" / "operating.md").read_text()
    anchors = {_slug(h) for h in re.findall(r"^#{2,4} (.+)$", text, re.M)}
    missing = RUNBOOK_ANCHORS - anchors
    assert not missing, f"docs/operating.md lacks runbook headings for {sorted(missing)}"


def _promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.skip(
            "promtool is absent (Debian/Ubuntu: apt-get install prometheus); "
            "alerts.yml and prometheus.yml were not checked by promtool"
        )
    return exe


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


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
    proc = _run(_promtool(), "check", "config", "deploy/prometheus/prometheus-k8s.yml")
    if proc.returncode != 0 and "kubernetes_sd_configs not found" in proc.stdout + proc.stderr:
        pytest.skip(
            "this promtool build has no Kubernetes service discovery (Debian's prometheus "
            "package omits it); prometheus-k8s.yml was only parsed as YAML"
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    """promtool really fails on a bad expression (so a pass above means something)."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "groups:\n- name: x\n  rules:\n  - alert: X\n    expr: sum by (a (pipeline_consumer_lag)\n"
    )
    proc = _run(_promtool(), "check", "rules", str(bad))
    assert proc.returncode != 0


# ------------------------------------------------------------------ env variables


# Modules whose pydantic-settings classes define the environment; missing ones are skipped.
MODULES_WITH_SETTINGS = (
    "pipeline.settings",
    "ingress.config",
    "router.config",
    "workers.settings",
    "scheduler.config",
    "scheduler.settings",
)


@cache
def known_env_vars() -> frozenset[str]:
    """Every environment variable some settings class reads."""
    from pydantic_settings import BaseSettings

    names: set[str] = set()
    for module_name in MODULES_WITH_SETTINGS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and f"{module_name}.".startswith(f"{exc.name}."):  # not written yet
                continue
            raise
        for obj in vars(module).values():
            if not (isinstance(obj, type) and issubclass(obj, BaseSettings)):
                continue
            if obj.__module__ != module_name:
                continue
            prefix = str(obj.model_config.get("env_prefix") or "")
            for field_name, info in obj.model_fields.items():
                names.add((info.alias or f"{prefix}{field_name}").upper())
    return frozenset(names)


def test_env_var_derivation() -> None:
    known = known_env_vars()
    for name in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "TEMPORAL_ADDRESS",
        "DATABASE_URL",
        "INGEST_METRICS_PORT",
    ):
        assert name in known
    assert "KAFKA_BOOTSTRAP_SERVER" not in known


# -------------------------------------------------------------------------- compose


@cache
def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[no-any-return]


APP_SERVICES = ("ingress", "router", "worker", "migrate")


def test_compose_services() -> None:
    services = _compose()["services"]
    for name in (
        "kafka",
        "postgresql",
        "temporal",
        "temporal-ui",
        "prometheus",
        "grafana",
        *APP_SERVICES,
    ):
        assert name in services, name
    assert services["kafka"]["image"] == "apache/kafka:4.1.1"
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["postgresql"]["image"] == "postgres:16"
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert "./prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    images = {services[s]["image"] for s in APP_SERVICES}
    assert len(images) == 1, "ingress/router/worker/migrate must run one image"
    for name in APP_SERVICES:
        svc = services[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
        assert svc["command"] == [name]
        assert svc["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert svc["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert svc["environment"]["DATABASE_URL"].startswith("postgresql://")
    for name in ("ingress", "router", "worker"):
        deps = services[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert str(METRICS_PORT) in " ".join(services[name]["healthcheck"]["test"])
    assert services["worker"]["environment"]["INGEST_SDK_METRICS_PORT"] == str(SDK_METRICS_PORT)


def test_compose_env_vars_are_read_by_settings() -> None:
    known = known_env_vars()
    unknown = {
        f"{name}: {var}"
        for name in APP_SERVICES
        for var in _compose()["services"][name]["environment"]
        if var not in known
    }
    assert not unknown


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and _run(docker, "compose", "version").returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_config_validates() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    proc = _run(*cli, "-f", "deploy/compose.yaml", "config", "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    assert re.search(r"^RUN pip install \.", text, re.M)
    assert 'ENTRYPOINT ["ingest"]' in text
    assert re.search(r"^COPY \. \.$", text, re.M), "copy the (dockerignore-filtered) repo root"
    ignored = {
        line.strip().removeprefix("**/").rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", "README.md"}
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        needed.add(pattern.rstrip("*").rstrip("."))
    assert not needed & ignored, f"Dockerfile.dockerignore excludes {needed & ignored}"


# ----------------------------------------------------------------------- kubernetes


def _deployments() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"].removeprefix("ingest-"): d for d in _k8s_kind("Deployment")}


def _configmap() -> dict[str, str]:
    (cm,) = _k8s_kind("ConfigMap")
    return cm["data"]  # type: ignore[no-any-return]


def _port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


@pytest.mark.parametrize("component", ["ingress", "router", "worker"])
def test_k8s_deployment(component: str) -> None:
    dep = _deployments()[component]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["args"] == [component]
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert live["path"] == "/healthz" and _port(container, live["port"]) == METRICS_PORT
    assert ready["path"] == "/readyz" and _port(container, ready["port"]) == METRICS_PORT
    res = container["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"]
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == str(METRICS_PORT)
    assert {"configMapRef": {"name": "ingest-config"}} in container["envFrom"]
    grace = float(_configmap()["INGEST_SHUTDOWN_GRACE_SECONDS"])
    assert spec["terminationGracePeriodSeconds"] > grace
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels["app.kubernetes.io/component"] == component
    env = {e["name"]: e for e in container.get("env", [])}
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "ingest-secrets"
    unknown = {n for n in env if n not in known_env_vars()}
    assert not unknown


@pytest.mark.parametrize("component", ["ingress", "router"])
def test_k8s_consumer_replicas_within_partitions(component: str) -> None:
    replicas = _deployments()[component]["spec"].get("replicas", 1)
    assert replicas <= int(_configmap()["KAFKA_PARTITIONS"])
    assert "partition" in (K8S / f"{component}.yaml").read_text().split("apiVersion")[0]


def test_k8s_worker_sdk_metrics_and_hpa() -> None:
    worker = _deployments()["worker"]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert _port(container, "sdk-metrics") == SDK_METRICS_PORT
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["INGEST_SDK_METRICS_PORT"] == str(SDK_METRICS_PORT)
    assert "replicas" not in worker["spec"], "the HPA owns the worker's replica count"
    (hpa,) = _k8s_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "ingest-worker",
    }
    assert any(m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])
    assert "type: External" in (K8S / "worker-hpa.yaml").read_text()


def test_k8s_pdbs_select_deployments() -> None:
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in _deployments().values()]
    pdbs = _k8s_kind("PodDisruptionBudget")
    assert pdbs
    for pdb in pdbs:
        selector = pdb["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), pdb


def test_k8s_configmap_secret_and_job() -> None:
    known = known_env_vars()
    assert not {k for k in _configmap() if k not in known}
    (secret,) = _k8s_kind("Secret")
    assert "DATABASE_URL" in secret["stringData"]
    assert not {k for k in secret["stringData"] if k not in known}
    text = (K8S / "secret.yaml").read_text()
    assert "TEMPORAL_API_KEY" in text and "KAFKA_SASL_PASSWORD" in text
    (job,) = _k8s_kind("Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")
    images = {
        c["image"]
        for d in [*_deployments().values(), job]
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert len(images) == 1


def test_k8s_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files


def test_k8s_schema() -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (pip install it)"
    )
    for path, doc in _k8s_docs():
        try:
            kv.validate(doc, kv.latest_version(), strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{path.name} {doc['kind']}: {exc.message}")


def test_kustomize_build() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is absent; `kubectl kustomize deploy/k8s` not run")
    proc = _run(kubectl, "kustomize", "deploy/k8s")
    assert proc.returncode == 0, proc.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(proc.stdout) if d]
    assert kinds.count("Deployment") == 3 and "Job" in kinds
