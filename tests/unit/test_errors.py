"""Every exception class the source packages define derives from ``schemas.errors.IngestError``.

Walks every module of every package (importing it) and checks each exception
class whose home is that module, so a new error outside the tree fails here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from schemas.errors import IngestError
from tests.unit.test_import_graph import PACKAGES
from workers.errors import TaskFailed


def _project_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        modules = [package] + [
            importlib.import_module(m.name)
            for m in pkgutil.walk_packages(package.__path__, f"{name}.")
        ]
        for module in modules:
            for obj in vars(module).values():
                if (
                    inspect.isclass(obj)
                    and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__
                ):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_walk_finds_the_errors() -> None:
    names = {e.__name__ for e in _project_exceptions()}
    assert {"ConfigError", "EnvelopeError", "PermanentTaskError", "TaskAborted"} <= names


def test_every_project_exception_is_an_ingest_error() -> None:
    outside = sorted(
        f"{e.__module__}.{e.__qualname__}"
        for e in _project_exceptions()
        if not issubclass(e, IngestError)
    )
    assert not outside, f"not under IngestError: {outside}"


def test_workflow_outcomes_are_typed_non_retryable_application_errors() -> None:
    outcomes = [
        e for e in _project_exceptions() if issubclass(e, TaskFailed) and e is not TaskFailed
    ]
    assert len(outcomes) >= 3
    for kind in outcomes:
        err = kind("why")
        assert (err.type, err.non_retryable, err.message) == (kind.__name__, True, "why")
