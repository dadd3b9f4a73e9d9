"""Docs name only paths that exist, and each package's module map names every module.

A path in backticks in the README, CONTRIBUTING, ``docs/*.md`` or a
folder's README must exist: from the repository root, from the document's folder,
or inside one of the project's folders (``flow/io.py`` in a sentence about
``schemas/``). ``module.function`` forms (``workers/store.finish_run``) count as
``workers/store.py``. Names of things outside this repository are listed below.

A package whose docstring maps its modules (names two or more of them) must name
every one: a module added without a line there fails here.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.support import ROOT

# Written like paths, but not paths of this repository.
ELSEWHERE = {
    "go.temporal.io/server",  # Go module
    "temporalio/ui-server",  # Go module
    "temporalio/auto-setup",  # container image
    "apache/kafka",  # container image
    "tests/kafkatest/tests/core/transactions_test.py",  # in Apache Kafka's repository
    "shared/seeds/002",  # the project's shared notes, outside the repository
    "topic/partition/offset",  # coordinates, not a path
    "dlq_source_topic/partition/offset",  # header names
    "SKIPS/H",  # a rate
}
_TOKEN = re.compile(r"`([^`\s]+)`")
_PATHY = re.compile(r"^[A-Za-z0-9_][\w.\-/]*$")
_EXT = (".py", ".md", ".sql", ".yml", ".yaml", ".json", ".toml", ".sh", ".html", ".xml", ".png")
_RUNTIME = ("bench/results/",)  # written by a run, git-ignored


def _docs() -> list[Path]:
    # Not CHANGELOG.md: it names paths as they were in each release.
    named = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    return [
        *[p for p in named if p.exists()],
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(p for p in ROOT.glob("*/README.md") if ".venv" not in p.parts),
        *sorted(ROOT.glob("tests/*/README.md")),
    ]


def _folders() -> list[Path]:
    """Every folder that holds a file git tracks."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return sorted({(ROOT / f).parent for f in tracked})


def _exists(token: str, doc: Path, folders: list[Path]) -> bool:
    token = token.rstrip("/")
    candidates = [token]
    head, _, last = token.rpartition("/")
    if "." in last and not last.endswith(_EXT):  # module.function
        candidates.append(f"{head}/{last.split('.')[0]}.py")
    if not last.endswith(_EXT) and "." not in last:
        candidates.append(token + ".py")
    bases = [ROOT, doc.parent, *folders]
    return any((base / c).exists() and ".." not in c for base in bases for c in candidates)


def doc_path_problems() -> list[str]:
    folders = _folders()
    bad = []
    for doc in _docs():
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for raw in _TOKEN.findall(line):
                token = raw.split(":")[0].split("#")[0]
                if not _PATHY.match(token) or token in ELSEWHERE:
                    continue
                if "/" not in token or token.startswith(_RUNTIME):
                    continue
                if not _exists(token, doc, folders):
                    bad.append(f"{doc.relative_to(ROOT)}:{n}: {token}")
    return bad


def test_every_path_the_docs_name_exists() -> None:
    assert doc_path_problems() == []


def test_the_check_finds_a_missing_path(tmp_path: Path) -> None:
    folders = _folders()
    doc = ROOT / "docs" / "architecture.md"
    assert _exists("router/flow/gate.py", doc, folders)
    assert _exists("flow/io.py", doc, folders)  # inside schemas/
    assert _exists("workers/store.finish_run", doc, folders)
    assert not _exists("router/flow/nowhere.py", doc, folders)
    assert not _exists("pipeline/stack/", doc, folders)


# --- module maps ------------------------------------------------------------------------

PACKAGE_ROOTS = (
    "app",
    "pipeline",
    "schemas",
    "ingress",
    "router",
    "relay",
    "replay",
    "workers",
    "scheduler",
    "definitions",
    "ops",
    "stack/devstack",
)


def _packages() -> list[tuple[str, Path]]:
    out = []
    for root in PACKAGE_ROOTS:
        base = ROOT / root
        top = Path(root).name
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base).parts
            out.append((".".join((top, *rel)), init.parent))
    return out


def _named(doc: str, dotted: str, module: str) -> bool:
    return any(
        form in doc
        for form in (f"{dotted}.{module}", f"``{module}``", f"`{module}.py`", f"({module}.py")
    )


def module_map_problems() -> list[str]:
    bad = []
    for dotted, folder in _packages():
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        modules = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
        named = [m for m in modules if _named(doc, dotted, m)]
        if len(named) >= 2:  # the docstring maps its modules: it must map them all
            bad += [f"{dotted}: {m}" for m in modules if m not in named]
    return bad


def test_every_module_map_names_every_module() -> None:
    assert module_map_problems() == []
