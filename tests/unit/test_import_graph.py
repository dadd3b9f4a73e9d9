"""The import graph of the source packages: layered, no cycle, workers/ free of the features.

Built with ``ast`` from every ``import`` statement, top-level or inside a
function (lazy imports count): an edge goes to the module named (``from a.b
import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``).
Checked per module (no cycle) and per package: every edge between two packages
goes down :data:`LAYERS` (docs/architecture.md draws them).
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "app",
    "pipeline",
    "schemas",
    "router",
    "replay",
    "ingress",
    "relay",
    "workers",
    "scheduler",
    "definitions",
    "ops",
    "devstack",
)
# Where a package lives when not at the root: the dev stack is a distribution of its own.
HOMES = {"devstack": Path("stack/devstack")}


# Bottom to top; a package imports only packages of lower layers (and itself).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("schemas",),
    ("pipeline",),
    ("ingress", "router", "relay", "workers", "definitions"),
    ("replay", "scheduler"),
    ("ops",),
    ("devstack",),  # a dev tool: only `ingest stack` (app) and the tests use it
    ("app",),
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        home = ROOT / HOMES.get(pkg, Path(pkg))
        for f in home.rglob("*.py"):
            parts = [pkg, *f.relative_to(home).with_suffix("").parts]
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def _graph() -> dict[str, set[str]]:
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            for name in names:
                target = resolve(name)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def test_graph_sees_the_imports() -> None:
    graph = _graph()
    assert "pipeline.starter" in graph["router.routing"]
    assert "workers.handlers.builtin" in graph["workers.handlers.registry"]


def test_no_import_cycle() -> None:
    try:
        tuple(TopologicalSorter(_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {exc.args[1]}") from None


def test_workers_import_no_feature_package() -> None:
    bad = sorted(
        (a, b)
        for a, targets in _graph().items()
        for b in targets
        if a.startswith("workers") and b.split(".")[0] in ("scheduler", "router", "replay")
    )
    assert not bad, bad


def test_schemas_import_only_schemas() -> None:
    graph = _graph()
    bad = sorted(
        (a, b)
        for a in graph
        if a.startswith("schemas")
        for b in graph[a]
        if not b.startswith("schemas")
    )
    assert not bad, bad


def _package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(importing package, imported package) -> the module edges behind it."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for a, targets in graph.items():
        for b in targets:
            pa, pb = a.split(".")[0], b.split(".")[0]
            if pa != pb:
                out.setdefault((pa, pb), []).append((a, b))
    return out


def test_every_package_has_a_layer() -> None:
    assert set(RANK) == set(PACKAGES)


def test_packages_import_only_lower_layers() -> None:
    bad = {
        f"{pa} -> {pb}": sorted(edges)[:3]
        for (pa, pb), edges in _package_edges(_graph()).items()
        if RANK[pa] <= RANK[pb]
    }
    assert not bad, f"upward or sideways package imports: {bad}"


def test_no_package_cycle() -> None:
    packages: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for pa, pb in _package_edges(_graph()):
        packages[pa].add(pb)
    try:
        tuple(TopologicalSorter(packages).static_order())
    except CycleError as exc:
        raise AssertionError(f"package import cycle: {exc.args[1]}") from None
