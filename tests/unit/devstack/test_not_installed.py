"""``ingest stack`` where the dev stack is not installed (the production image): one line
saying how to install it, exit code 2; ``ingest --help`` still lists the command."""

from __future__ import annotations

import sys

import pytest

from app.cli import build_parser, main


def test_stack_without_devstack_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "devstack", None)  # import devstack -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "devstack.manager", raising=False)
    assert main(["stack", "status"]) == 2
    err = capsys.readouterr().err
    assert "ingest stack: the local stack is not installed here" in err
    assert "pip install -e ./stack" in err


def test_help_lists_stack_without_importing_devstack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "devstack", None)
    monkeypatch.delitem(sys.modules, "devstack.manager", raising=False)
    assert "stack" in build_parser().format_help()
