"""No metric label takes its value from event data (DESIGN convention 14, issue 34 item 4).

A label whose values come from events makes one series per distinct value: a million
event types made a million ``pipeline_events_unmatched_total{type=...}`` series in the
router and in Prometheus. Two checks keep that from coming back:

* every metric declared in :mod:`pipeline.metrics` uses only label names of
  :data:`BOUNDED_LABELS`, each with the reason its domain is bounded (code constants,
  or configuration such as the activities table and the handler registry; never an
  event);
* every ``.labels(...)`` call and every ``start_at_zero(...)`` call in the shipped
  packages is read with ``ast``: each label value must be a constant, or a name whose
  meaning is one of :data:`SOURCES` (a local variable is followed to what it was
  assigned). An event field (``env.type``, ``event[...]``, ``data``, a header, a
  Kafka key or value), a subscript or slice, or a lookup in a mapping that is not a
  module constant fails, unless :data:`REVIEWED` says why that one call is bounded.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline import metrics
from tests.support import ROOT
from tests.unit.deploy.assets import metric_modules, shipped_packages

# Every label name a metric may have, and why its values are bounded.
BOUNDED_LABELS = {
    "component": "the counting process's own name, a code constant (ingress, router, worker, "
    "scheduler)",
    "topic": "a topic named in the process's settings (consumers subscribe to nothing else)",
    "partition": "a partition number of those topics (broker configuration)",
    "strategy": "an ingress stamping strategy (ingress/stamping.py) or 'existing'",
    "trigger": "event | cron (schemas), 'unknown' for a task payload without one",
    "layer": "LAYER_* in pipeline/metrics.py",
    "reason": "a DLQ reason declared in code (schemas.envelope R_*, route_failed, "
    "start_rejected) or a flow skip reason (rate_limit, singleton)",
    "error": "a retriable Temporal status name (pipeline.starter.START_ERROR_LABELS)",
    "result": "inserted | existing",
    "task_type": "a handler in the worker's registry (configuration, not events)",
    "status": "a TaskStatus value (schemas.status)",
    "policy": "a misfire policy (skip | catchup | compress), validated on apply",
    "activity": "an activity id from the activities table (configuration applied by "
    "operators, not events)",
    "action": "fix | skip | abort",
    "cause": "how a run ended otherwise (workers.flow.metrics.CAUSES)",
    "resource": "a permit resource declared in permit_resources (configuration)",
    "outcome": "an approval outcome (approve, reject, request_changes, auto_reject, "
    "resubmission_timeout)",
}

# What a label value may be read from (a variable, an attribute, or a function that
# returns one), and why that is bounded. UPPER_CASE module constants are always fine.
SOURCES = {
    "component": "the process's own name",
    "topic": "a consumer's assigned topic (configured)",
    "events_topic": "the configured events topic",
    "raw_topics": "the configured raw topics",
    "partition": "a partition number",
    "label": "an ingress stamping strategy's label",
    "trigger_kind": "event | cron",
    "trigger": "event | cron",
    "reason": "a DLQ or flow skip reason declared in code",
    "outage": "pipeline.starter.outage: one of START_ERROR_LABELS",
    "error": "one of START_ERROR_LABELS",
    "misfire_policy": "skip | catchup | compress",
    "activity_id": "an activity id (activities table)",
    "activity": "an activity id (activities table)",
    "task_type": "a registered handler",
    "task_types": "the registered handlers",
    "status": "a TaskStatus",
    "action": "fix | skip | abort",
    "outcome": "an approval outcome",
    "decision": "approve | reject | request_changes (checked by the update's validator)",
    "resource": "a declared permit resource",
    "ended_cause": "one of workers.flow.metrics.CAUSES",
}

# Identifiers that name event data (or a Kafka record's key, value, headers): a label
# value read through one of them fails even when its last name is in SOURCES.
EVENT_DATA = frozenset(
    {
        "env",
        "envelope",
        "event",
        "events",
        "evt",
        "ce",
        "cloudevent",
        "data",
        "payload",
        "body",
        "raw",
        "value",
        "key",
        "keys",
        "headers",
        "type",
        "event_id",
        "source",
        "subject",
    }
)

# Calls reviewed by hand, by (path, label): why the value is bounded although the scan
# cannot tell.
REVIEWED = {
    ("pipeline/metrics.py", "**"): "start_at_zero's own loop: its values are checked where "
    "start_at_zero is called",
    ("workers/activities.py", "trigger"): "payload['trigger'] is written by workers/planning.py "
    "from the run (trigger_kind event | cron) and is reserved from patches "
    "(workers/merge_patch.py RESERVED_KEYS); 'unknown' otherwise",
}

_TRANSPARENT = frozenset({"str", "sorted", "list", "set", "frozenset", "tuple"})
_STRING_METHODS = frozenset({"lower", "upper", "strip", "decode", "encode"})
_MAPPING_METHODS = frozenset({"get", "values", "keys", "items", "pop", "setdefault"})
_CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class LabelUse:
    path: str
    line: int
    label: str  # the keyword, "#<n>" for a positional value, "**" for **kwargs
    source: str  # the value's source text

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.label}={self.source}"


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None when it is not a plain name or attribute chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _assignments(func: ast.AST | None) -> dict[str, list[ast.expr]]:
    """Values assigned to each plain local name in ``func`` (``x = ...``, ``x: T = ...``)."""
    out: dict[str, list[ast.expr]] = {}
    if func is None:
        return out
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            if isinstance(node.target, ast.Name):
                out.setdefault(node.target.id, []).append(node.value)
    return out


def problems_of(
    expr: ast.expr, assigned: dict[str, list[ast.expr]], seen: frozenset[str] = frozenset()
) -> list[str]:
    """Why ``expr`` may carry event data (empty: its values are bounded)."""
    if isinstance(expr, ast.Constant):
        return []
    if isinstance(expr, ast.JoinedStr):
        return [p for v in expr.values for p in problems_of(v, assigned, seen)]
    if isinstance(expr, ast.FormattedValue):
        return problems_of(expr.value, assigned, seen)
    if isinstance(expr, ast.IfExp):
        return problems_of(expr.body, assigned, seen) + problems_of(expr.orelse, assigned, seen)
    if isinstance(expr, ast.BoolOp):
        return [p for v in expr.values for p in problems_of(v, assigned, seen)]
    if isinstance(expr, ast.List | ast.Tuple | ast.Set):
        return [p for e in expr.elts for p in problems_of(e, assigned, seen)]
    if isinstance(expr, ast.Starred):
        return problems_of(expr.value, assigned, seen)
    if isinstance(expr, ast.Subscript):
        return [f"a subscript or slice ({ast.unparse(expr)}): event fields are read that way"]
    if isinstance(expr, ast.Call):
        return _call_problems(expr, assigned, seen)
    chain = _chain(expr)
    if chain is None:
        return [f"cannot tell where {ast.unparse(expr)!r} comes from"]
    if tainted := EVENT_DATA.intersection(chain):
        return [f"{ast.unparse(expr)} reads event data ({', '.join(sorted(tainted))})"]
    if len(chain) == 1 and chain[0] in assigned and chain[0] not in seen:
        name = chain[0]
        return [p for v in assigned[name] for p in problems_of(v, assigned, seen | {name})]
    if chain[-1] in SOURCES or _CONSTANT.fullmatch(chain[-1]):
        return []
    return [f"{ast.unparse(expr)}: {chain[-1]!r} is not a known bounded source (SOURCES)"]


def _call_problems(
    call: ast.Call, assigned: dict[str, list[ast.expr]], seen: frozenset[str]
) -> list[str]:
    func = call.func
    args = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(func, ast.Name) and func.id in _TRANSPARENT:
        return [p for a in args for p in problems_of(a, assigned, seen)]
    if isinstance(func, ast.Attribute) and func.attr in _STRING_METHODS:
        return problems_of(func.value, assigned, seen)
    if isinstance(func, ast.Attribute) and func.attr in _MAPPING_METHODS:
        receiver = _chain(func.value)
        if receiver is not None and _CONSTANT.fullmatch(receiver[-1]):
            return []  # a lookup in a module constant answers one of its own values
        return [f"{ast.unparse(call)} looks a value up in a mapping that is not a constant"]
    chain = _chain(func)
    if chain is None:
        return [f"cannot tell what {ast.unparse(call)!r} returns"]
    if tainted := EVENT_DATA.intersection(chain):
        return [f"{ast.unparse(call)} reads event data ({', '.join(sorted(tainted))})"]
    if chain[-1] in SOURCES:
        return []
    return [f"{ast.unparse(call)}: {chain[-1]!r} is not a known bounded source (SOURCES)"]


def label_uses(tree: ast.AST, path: str) -> Iterator[tuple[LabelUse, list[str]]]:
    """Each label value given to ``.labels(...)`` or ``start_at_zero(...)`` in ``tree``,
    with its problems."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def enclosing(node: ast.AST) -> ast.AST | None:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return node
        return None

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _chain(node.func)
        if name is None or name[-1] not in ("labels", "start_at_zero"):
            continue
        values: list[tuple[str, ast.expr]] = []
        if name[-1] == "labels":
            values += [(f"#{i}", a) for i, a in enumerate(node.args)]
        values += [(k.arg or "**", k.value) for k in node.keywords]
        assigned = _assignments(enclosing(node))
        for label, value in values:
            use = LabelUse(path, node.lineno, label, ast.unparse(value))
            if (path, label) in REVIEWED:
                yield use, []
            elif label == "**":
                yield use, ["label values from **kwargs cannot be read"]
            else:
                yield use, problems_of(value, assigned)


def scan(root: Path, packages: list[str]) -> list[tuple[LabelUse, list[str]]]:
    out = []
    for package in packages:
        for file in sorted((root / package).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            out += list(label_uses(ast.parse(file.read_text(), rel), rel))
    return out


def _scan_snippet(code: str) -> list[str]:
    return [p for _, found in label_uses(ast.parse(code), "snippet.py") for p in found]


# --- the checks ------------------------------------------------------------------------


def test_every_metric_label_has_a_bounded_domain() -> None:
    declared = {
        name: obj
        for module in metric_modules()
        for name, obj in vars(module).items()
        if isinstance(obj, metrics.MetricWrapperBase)
    }
    assert len(declared) >= 30, "pipeline.metrics should declare every metric"
    unbounded = {
        f"{name}: {label}"
        for name, obj in declared.items()
        for label in obj._labelnames
        if label not in BOUNDED_LABELS
    }
    assert unbounded == set(), (
        "labels whose values are not known to be bounded (a label value must never come "
        "from event data: DESIGN convention 14)"
    )


def test_no_label_value_comes_from_event_data() -> None:
    uses = scan(ROOT, shipped_packages())
    assert len(uses) >= 60, f"only {len(uses)} label values found: is the scan right?"
    bad = [f"{use}: {'; '.join(found)}" for use, found in uses if found]
    assert bad == []


def test_every_reviewed_exception_is_still_used() -> None:
    uses = {(u.path, u.label) for u, _ in scan(ROOT, shipped_packages())}
    assert set(REVIEWED) <= uses, set(REVIEWED) - uses


def test_the_scan_flags_event_data_and_accepts_bounded_sources() -> None:
    """The checker's own negative test: each of these must be reported."""
    flagged = [
        "metrics.EVENTS_UNMATCHED.labels(type=env.type[:100]).inc()",
        "M.labels(type=env.type).inc()",
        'M.labels(kind=event["type"]).inc()',
        "M.labels(kind=data).inc()",
        "M.labels(kind=msg.value.decode()).inc()",
        "M.labels(kind=kafka.header(msg.headers, 'ce_type')).inc()",
        'M.labels(kind=f"t-{env.source}").inc()',
        "M.labels(kind=ev.get('type')).inc()",
        "def f(env):\n    t = env.type\n    M.labels(kind=t).inc()",
        "def f(x):\n    M.labels(kind=x).inc()",
        "start_at_zero(M, kind=[env.type])",
        "M.labels(**labels).inc()",
    ]
    for code in flagged:
        assert _scan_snippet(code), code
    accepted = [
        "M.labels(component=self.component, topic=tp.topic, partition=str(tp.partition))",
        "M.labels(activity=run.activity_id, reason=d.reason)",
        "M.labels(result=RUN_INSERTED if inserted else RUN_EXISTING)",
        "M.labels(component='worker', layer=metrics.LAYER_LEDGER)",
        "M.labels(outcome=_OUTCOME_OF_KIND.get(kind))",
        "def f(exc):\n    error = outage(exc)\n    M.labels(error=error).inc()",
        "start_at_zero(M, component=[component], reason=DLQ_REASONS)",
    ]
    for code in accepted:
        assert _scan_snippet(code) == [], code
