"""Every series an alert rule or a dashboard panel reads exists at 0 when a process starts.

Prometheus takes a series' first sample as its start, so a labelled counter that first
appears at 1 after a restart has ``increase() == 0``: the first dead letter after every
restart would never fire ``IngestDeadLetters`` (issue 21). Each process therefore sets
its series up at start (``pipeline.metrics.start_at_zero``).

Each process's metrics are set up in a fresh interpreter, exactly as the process does
it, and its /metrics text is checked against every ``pipeline_*`` reference in
``deploy/prometheus/alerts.yml`` and the Grafana dashboard. Which process must expose
a metric is read from the code: the metrics its modules count (``metrics.X`` or
``from pipeline.metrics import X``). A metric the process does not expose at all fails;
a missing series is never read as 0. Only the metrics of
``pipeline.metrics.DATA_LABELLED`` (labelled by data, such as partitions or event
types) may lack series, and their family must still be declared.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import pytest

from pipeline import metrics
from schemas import envelope
from tests.support import ROOT
from tests.unit.deploy.assets import (
    _alert_rules,
    _dashboard_exprs,
    defined_metrics,
    metric_modules,
    resolve_metric,
)

# The modules each process runs that count metrics (the router starts runs through
# pipeline.starter; the worker's parts come from workers/ and scheduler/).
SOURCES = {
    "ingress": ("ingress",),
    "router": ("router", "pipeline/starter.py"),
    "worker": ("workers", "scheduler"),
    "ops": ("ops",),
    "relay": ("relay",),
}

# How each process sets its metrics up, run in a fresh interpreter. The worker builds
# its real parts (app.parts.worker_parts) as `ingest worker` does; the parts'
# factories only store the client and the pool, so none is needed here.
SETUP = {
    "ingress": """
from ingress.service import start_metrics_at_zero
from ingress.settings import load_ingress_settings
from pipeline.settings import load_settings
start_metrics_at_zero(load_settings("ingress"), load_ingress_settings().stamping())
""",
    "router": """
from pipeline.settings import load_settings
from router.service import start_metrics_at_zero
start_metrics_at_zero(load_settings("router"))
""",
    "worker": """
from app.parts import worker_parts
from pipeline.settings import load_settings
from workers.handlers import Resources, load_registry
from workers.parts import PartDeps
from workers.settings import load_worker_settings
wcfg = load_worker_settings()
deps = PartDeps(None, None, load_settings("worker"), wcfg, load_registry(wcfg.task_handlers),
                Resources(lambda: None, wcfg.emit_topic))
for factory in worker_parts():
    factory(deps)
""",
    "ops": """
import ops.service
""",
    "relay": """
import relay.service
""",
}
EXPOSE = """
import sys
from prometheus_client import REGISTRY, generate_latest
sys.stdout.write(generate_latest(REGISTRY).decode())
"""


@cache
def exposition(component: str) -> str:
    """The /metrics text of ``component`` right after its metrics are set up."""
    proc = subprocess.run(
        [sys.executable, "-c", SETUP[component] + EXPOSE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, f"{component} setup failed:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module", autouse=True)
def _expose_in_parallel() -> None:
    with ThreadPoolExecutor(len(SETUP)) as pool:
        list(pool.map(exposition, SETUP))


# --- what the rules and panels reference ---------------------------------------------

_REF = re.compile(r"\b(pipeline_[A-Za-z0-9_:]*)\s*(?:\{([^}]*)\})?")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Ref:
    where: str
    series: str  # e.g. pipeline_start_latency_seconds_bucket
    matchers: tuple[tuple[str, str, str], ...]

    def matches(self, labels: dict[str, str]) -> bool:
        for name, op, value in self.matchers:
            have = labels.get(name, "")
            ok = {
                "=": have == value,
                "!=": have != value,
                "=~": re.fullmatch(value, have) is not None,
                "!~": re.fullmatch(value, have) is None,
            }[op]
            if not ok:
                return False
        return True

    def __str__(self) -> str:
        inner = ",".join(f'{n}{op}"{v}"' for n, op, v in self.matchers)
        return f"{self.series}{{{inner}}}" if inner else self.series

    def wants(self, component: str) -> bool:
        """False when the reference selects another process's ``component`` label."""
        on_component = tuple(m for m in self.matchers if m[0] == "component")
        return Ref(self.where, self.series, on_component).matches({"component": component})


def references(text: str, where: str) -> Iterator[Ref]:
    for series, body in _REF.findall(text):
        yield Ref(where, series, tuple(_MATCHER.findall(body or "")))


def referenced() -> list[Ref]:
    refs = [r for e in _dashboard_exprs() for r in references(e, f"panel: {e}")]
    for rule in _alert_rules():
        refs.extend(references(rule["expr"], f"alert {rule['alert']}"))
    return refs


# --- which process counts which metric -------------------------------------------------


def _metric_names() -> dict[str, str]:
    """``{attribute in a metrics module: defined (exported) name}``."""
    out = {}
    for module in metric_modules():
        for attr, obj in vars(module).items():
            if isinstance(obj, metrics.MetricWrapperBase):
                (family,) = obj.describe()
                out[attr] = family.name + ("_total" if family.type == "counter" else "")
    return out


def used_metrics(component: str) -> frozenset[str]:
    """The defined names of the metrics ``component``'s modules count."""
    names = _metric_names()
    used: set[str] = set()
    for source in SOURCES[component]:
        path = ROOT / source
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text())):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("metrics", "flow_metrics")
                    and node.attr in names
                ):
                    used.add(names[node.attr])
                elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("metrics"):
                    used.update(names[a.name] for a in node.names if a.name in names)
    return frozenset(used)


def _data_labelled() -> frozenset[str]:
    names = _metric_names()
    return frozenset(
        names[attr]
        for module in metric_modules()
        for attr, obj in vars(module).items()
        if isinstance(obj, metrics.MetricWrapperBase) and obj in metrics.DATA_LABELLED
    )


# --- the check -------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def declared_families(text: str) -> set[str]:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def problems(component: str, text: str, refs: list[Ref], used: frozenset[str]) -> list[str]:
    """Every reference ``component`` must answer that its exposition ``text`` does not."""
    defined = defined_metrics()
    data = _data_labelled()
    have = samples(text)
    families = declared_families(text)
    found = []
    for ref in refs:
        resolved = resolve_metric(ref.series, defined)
        assert resolved is not None, f"{ref.where}: {ref.series} is not defined"
        name, _ = resolved
        if name not in used or not ref.wants(component):
            continue
        if name not in families:
            found.append(f"{ref.where}: {component} does not expose {name} at all")
            continue
        if name in data:
            continue
        matching = [v for s, labels, v in have if s == ref.series and ref.matches(labels)]
        if not matching:
            found.append(f"{ref.where}: {component} has no series {ref}")
        elif any(v != 0 for v in matching):
            found.append(f"{ref.where}: {component}'s {ref.series} does not start at 0")
    return found


@pytest.mark.parametrize("component", sorted(SETUP))
def test_every_referenced_series_starts_at_zero(component: str) -> None:
    refs = referenced()
    assert len(refs) >= 30, "the rules and the dashboard should reference many metrics"
    used = used_metrics(component)
    assert used, f"{component}'s modules count no metric: is SOURCES right?"
    assert problems(component, exposition(component), refs, used) == []


def test_every_process_that_counts_a_referenced_metric_was_checked() -> None:
    """A metric a panel reads but no process in SOURCES counts would escape the check."""
    defined = defined_metrics()
    everywhere = set().union(*(used_metrics(c) for c in SOURCES))
    unowned = {
        r.series
        for r in referenced()
        if (res := resolve_metric(r.series, defined)) and res[0] not in everywhere
    }
    assert unowned == set()


def test_every_known_dlq_reason_starts_at_zero() -> None:
    """The issue's case: the router's first missing_event_id must be an increase from 0."""
    reasons = {
        c: {
            labels["reason"]
            for s, labels, v in samples(exposition(c))
            if s == "pipeline_dlq_messages_total" and labels["component"] == c and v == 0
        }
        for c in ("ingress", "router")
    }
    declared = metrics.declared(envelope, "R_")
    assert envelope.R_MISSING_EVENT_ID in reasons["router"]
    assert declared <= reasons["router"] and declared <= reasons["ingress"]


def test_the_check_reports_a_missing_series_and_a_missing_metric() -> None:
    """The checker's own negative test: it must not read a missing series as 0."""
    refs = list(references('rate(pipeline_dlq_messages_total{component="router"}[5m])', "t"))
    used = frozenset({"pipeline_dlq_messages_total"})
    declared_only = "# TYPE pipeline_dlq_messages_total counter\n"
    ingress_only = declared_only + (
        'pipeline_dlq_messages_total{component="ingress",reason="not_json"} 0.0\n'
    )
    router = declared_only + (
        'pipeline_dlq_messages_total{component="router",reason="missing_event_id"} 0.0\n'
    )
    assert problems("router", declared_only, refs, used) != []
    assert problems("router", ingress_only, refs, used) != []
    assert problems("router", "", refs, used) != []  # the metric is not exposed at all
    assert problems("router", router.replace(" 0.0", " 1.0"), refs, used) != []
    assert problems("router", router, refs, used) == []
    assert problems("ingress", declared_only, refs, used) == []  # selects the router only
    both = list(references('pipeline_dlq_messages_total{component="router",reason="x"}', "t"))
    assert problems("router", router, both, used) != []  # router must answer: no reason="x"
