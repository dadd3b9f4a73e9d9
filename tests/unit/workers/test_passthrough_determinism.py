"""The workflow modules the worker passes through the sandbox call nothing non-deterministic.

``workers.sandbox`` passes the run's workflow modules through the sandbox to save
the per-instance reload; the price is that the sandbox no longer intercepts a
``datetime.now()`` written directly in them. This check takes that job over: it
reads each passed-through module's source and fails on a call the sandbox would
have refused in workflow code (the clock, randomness, uuid1/uuid4, the
environment, files, threads, sockets, sleeping). Workflow code uses
``workflow.now()``, ``workflow.uuid4()``, ``workflow.random()``, ``workflow.sleep()``.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from workers.parts import CORE_WORKFLOW_MODULES

FORBIDDEN_ATTRS = {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter"),
    ("time", "sleep"), ("asyncio", "sleep"), ("uuid", "uuid1"), ("uuid", "uuid4"),
    ("os", "getenv"), ("os", "environ"), ("os", "urandom"), ("threading", "Thread"),
    ("socket", "socket"), ("secrets", "token_bytes"), ("secrets", "token_hex"),
}  # fmt: skip
FORBIDDEN_MODULES = {"random", "secrets", "socket", "threading", "subprocess"}
FORBIDDEN_NAMES = {"open", "input"}


def offences(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in FORBIDDEN_ATTRS or node.value.id in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_NAMES:
                found.append(f"line {node.lineno}: {node.func.id}()")
        elif isinstance(node, ast.ImportFrom) and node.module in FORBIDDEN_MODULES:
            found.append(f"line {node.lineno}: from {node.module} import ...")
    return found


@pytest.mark.parametrize("module", [*CORE_WORKFLOW_MODULES, "workers.steps"])
def test_passed_through_workflow_module_is_deterministic(module: str) -> None:
    source = inspect.getsource(importlib.import_module(module))
    assert offences(source) == [], f"{module} calls what workflow code must not"


def test_the_check_sees_a_clock_read() -> None:
    bad = "from datetime import datetime\nasync def run(self):\n    return datetime.now()\n"
    assert offences(bad) == ["line 3: datetime.now"]
    assert offences("import random\nx = random.random()\n") == ["line 2: random.random"]
    assert offences("def f():\n    return open('x')\n") == ["line 2: open()"]
