"""What the deployment-asset tests share: paths, loaders, the metric checker, and the
environment variables the settings classes read. One test module per asset:

* ``test_metric_names.py``: the checker, and the dashboard's and alert rules' metric names;
* ``test_metric_init.py``: every series they read exists at 0 when each process starts;
* ``test_parsing.py``: every YAML and JSON file parses;
* ``test_dashboard.py``: the Grafana dashboard and its provisioning;
* ``test_prometheus.py``: scrape configs, alert rules, runbook links, promtool;
* ``test_env_vars.py``: the settings classes and the variables they read;
* ``test_compose.py``: the compose file and the Dockerfile;
* ``test_kubernetes.py``: manifests, probes, replicas, kustomization, schema.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.support import ROOT

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
        "dependency-failing",
        "misfires",
        "process-down",
        "task-pending-fix",
        "replay-after-an-incident",
        "adding-partitions-or-replicas",
        "permits-saturated",
        "approvals-escalated",
        "relay-lag",
        "flow-wait-too-long",
        "held-runs-stuck",
        "activity-paused-long",
        "runs-timing-out",
        "ordered-line-blocked",
    }
)


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


def shipped_packages() -> list[str]:
    """The packages pyproject ships (every process's code), e.g. ``router``."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = conf["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(p.rstrip("*") for p in include)


def metric_files() -> list[Path]:
    """Every module that declares metrics: ``pipeline/metrics.py`` (what every process
    shares) and each feature's own ``metrics.py`` (e.g. ``router/flow/metrics.py``)."""
    files = [f for pkg in shipped_packages() for f in (ROOT / pkg).rglob("metrics.py")]
    assert ROOT / "pipeline" / "metrics.py" in files
    return sorted(files)


def metric_modules() -> list[Any]:
    """:func:`metric_files`, imported."""
    return [
        importlib.import_module(".".join(f.relative_to(ROOT).with_suffix("").parts))
        for f in metric_files()
    ]


@cache
def defined_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """``{exported name: (kind, label names)}`` parsed from every :func:`metric_files`.

    Parsed, not imported, so the check needs no process-wide registry and sees
    exactly the literals the code passes to prometheus_client.
    """
    found: dict[str, tuple[str, frozenset[str]]] = {}
    nodes = [n for f in metric_files() for n in ast.walk(ast.parse(f.read_text()))]
    for node in nodes:
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
        grouping: set[str] = set(TARGET_LABELS)
        for base, suffix in referenced:
            grouping |= metrics[base][1]
            if suffix == "_bucket":
                grouping.add("le")
        for group in _GROUPING_RE.findall(text):
            for label in (x.strip() for x in group.split(",")):
                if label and label not in grouping:
                    problems.append(f"grouping label {label!r} is on none of {sorted(grouping)}")
    return problems


# Settings are found by reading the source, not from a hand-kept list: every class
# deriving from pydantic-settings' BaseSettings in the source packages. A module that
# fails to import fails the test (nothing is skipped).
def _source_packages() -> list[str]:
    """The packages pyproject.toml ships (``include = ["pipeline*", ...]``)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [p.rstrip("*") for p in find["packages"]["find"]["include"]]


def _base_name(node: ast.expr) -> str | None:
    return getattr(node, "id", getattr(node, "attr", None))


def settings_modules() -> list[str]:
    """Modules of the source packages that define a BaseSettings subclass."""
    found = []
    for package in _source_packages():
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            if any(
                isinstance(node, ast.ClassDef)
                and any(
                    getattr(b, "id", getattr(b, "attr", None)) == "BaseSettings" for b in node.bases
                )
                for node in ast.walk(tree)
            ):
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


@cache
def known_env_vars() -> frozenset[str]:
    """Every environment variable some settings class reads."""
    from pydantic_settings import BaseSettings

    names: set[str] = set()
    for module_name in settings_modules():
        module = importlib.import_module(module_name)
        for obj in vars(module).values():
            if not (isinstance(obj, type) and issubclass(obj, BaseSettings)):
                continue
            if obj.__module__ != module_name:
                continue
            prefix = str(obj.model_config.get("env_prefix") or "")
            for field_name, info in obj.model_fields.items():
                names.add((info.alias or f"{prefix}{field_name}").upper())
    return frozenset(names)


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@cache
def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[no-any-return]
