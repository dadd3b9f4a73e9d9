"""Task handlers: the registry keyed by task_type, and the built-in handlers."""

from workers.handlers.base import Handler, Resources, TaskContext, register
from workers.handlers.errors import PermanentTaskError, RetryableTaskError, TaskError
from workers.handlers.registry import Registry, load_registry

__all__ = [
    "Handler",
    "PermanentTaskError",
    "Registry",
    "Resources",
    "RetryableTaskError",
    "TaskContext",
    "TaskError",
    "load_registry",
    "register",
]
