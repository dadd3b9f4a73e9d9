"""The task handler registry: task_type -> handler, built once per worker.

Sources, later ones overriding earlier ones (an override is logged):

1. the built-ins (``workers.handlers.builtin``): ``noop``, ``fail``, ``emit``, ``webhook``;
2. entry points in the group ``ingest.task_handlers`` (name = task type);
3. ``INGEST_TASK_HANDLERS="mymod:func,othermod"``: ``module:attr`` adds one handler,
   a bare ``module`` adds every function in it decorated with ``@register``.

``@register("name")`` (:mod:`workers.handlers.base`) only tags the function (no
global state), so importing a module has no side effects and each worker builds
its own registry.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from pipeline.settings import ConfigError
from schemas.approval_io import APPROVAL_TASK_TYPE
from workers.handlers import builtin
from workers.handlers.base import Handler, is_registered, is_short, register, task_type_of

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registry",
    "add_from_spec",
    "known_task_types",
    "load_registry",
    "register",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ingest.task_handlers"


class Registry:
    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        for name, fn in (handlers or {}).items():
            self.add(fn, name)

    def add(self, fn: Handler, name: str | None = None, source: str = "code") -> None:
        task_type = name or task_type_of(fn)
        if not task_type:
            raise ConfigError(f"handler {fn!r} from {source} has no task type")
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(f"handler {task_type!r} from {source} must be an async function")
        if task_type in self._handlers and self._handlers[task_type] is not fn:
            log.warning("task handler %r replaced by the one from %s", task_type, source)
        self._handlers[task_type] = fn

    def get(self, task_type: str) -> Handler | None:
        return self._handlers.get(task_type)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def short(self) -> frozenset[str]:
        """The task types whose handler declares itself short (``register(short=True)``)."""
        return frozenset(t for t, fn in self._handlers.items() if is_short(fn))

    def __contains__(self, task_type: object) -> bool:
        return task_type in self._handlers


def _registered_in(module: Any) -> Iterable[Handler]:
    for _, obj in inspect.getmembers(module, inspect.iscoroutinefunction):
        if is_registered(obj):
            yield obj


def add_from_spec(registry: Registry, spec: str) -> None:
    """Add handlers named by an ``INGEST_TASK_HANDLERS`` value; ``ConfigError`` if bad."""
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        mod_name, _, attr = item.partition(":")
        source = f"INGEST_TASK_HANDLERS item {item!r}"
        try:
            module = importlib.import_module(mod_name)
        except Exception as exc:
            raise ConfigError(f"{source}: cannot import {mod_name}: {exc}") from None
        if not attr:
            found = list(_registered_in(module))
            if not found:
                raise ConfigError(f"{source}: no @register handlers in {mod_name}")
            for fn in found:
                registry.add(fn, source=source)
            continue
        named = getattr(module, attr, None)
        if named is None:
            raise ConfigError(f"{source}: {mod_name} has no attribute {attr!r}")
        registry.add(named, source=source)


def load_registry(spec: str = "", *, use_entry_points: bool = True) -> Registry:
    """Built-ins, then entry points, then the ``INGEST_TASK_HANDLERS`` spec."""
    registry = Registry()
    for fn in builtin.BUILTINS:
        registry.add(fn, source="built-ins")
    if use_entry_points:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            source = f"entry point {ep.name} = {ep.value}"
            try:
                fn = ep.load()
            except Exception as exc:
                raise ConfigError(f"{source}: cannot load: {exc}") from None
            registry.add(fn, ep.name, source=source)
    add_from_spec(registry, spec)
    return registry


def known_task_types(spec: str = "", *, use_entry_points: bool = True) -> list[str]:
    """Every task type a worker with this handler list runs, sorted: its handlers
    (:func:`load_registry`) and ``approval``, which the task workflow runs itself.

    What ``ingest activities apply`` checks a definition's task types against.
    """
    names = load_registry(spec, use_entry_points=use_entry_points).names()
    return sorted({*names, APPROVAL_TASK_TYPE})
