"""Tracing on, with the SDK's in-memory exporter, for one test at a time
(tests/support/tracing.py)."""

from tests.support.tracing import _memory, spans  # noqa: F401 (fixtures)
