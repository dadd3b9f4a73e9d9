"""Worker tests: the real worker in-process on the per-test task queue (helpers that
start runs are in :mod:`tests.support.runs`)."""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.settings import Settings
from tests.support.runs import WorkerFactory, worker_factory


@pytest.fixture
def worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> WorkerFactory:
    """``async with worker(...)``: see :func:`tests.support.runs.worker_factory`."""
    return worker_factory(cfg, temporal, db_pool)
