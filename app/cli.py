"""``ingest``: the single console script, with every subcommand.

The composition root of the command line: it alone knows every subcommand module
(each declares a ``COMMAND``, :class:`app.command.Command`), so it sits above
every other package. How a command runs and ends (exit codes, ``os._exit``) is
:mod:`app.dispatch`, shared with the ``python -m <package>`` entry points.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NoReturn

from app.dispatch import dispatch, end_process, exit_code

# Subcommand modules, in --help order. Imported lazily so `ingest stack status`
# does not pay for the Temporal worker imports.
COMMANDS = [
    "app.commands.stack",
    "app.commands.migrate",
    "app.commands.temporal",
    "app.commands.run",
    "app.commands.ingress",
    "app.commands.router",
    "app.commands.relay",
    "app.commands.replay",
    "app.commands.worker",
    "app.commands.activities",
    "app.commands.schedules",
    "app.commands.ops",
    "app.commands.permits",
    "app.commands.flow",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ingest",
        description=(
            "Kafka -> Temporal ingestion pipeline. Events on the raw topic are stamped "
            "with a stable event_id (ingress), routed to RunActivityWorkflow starts with "
            "deterministic ids (router), and run by workers that log each run once. "
            "Configuration comes from environment variables (all listed in "
            "docs/configuration.md) and flags."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(name).COMMAND.add_to(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``ingest [COMMAND ...]`` in-process: parse, dispatch, return the exit code."""
    return dispatch(build_parser().parse_args(argv))


def entry() -> NoReturn:
    """The ``ingest`` console script."""
    end_process(exit_code(main))


if __name__ == "__main__":
    entry()
