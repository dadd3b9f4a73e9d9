"""``ingest``: the single console script, and the one way every CLI entry point runs.

Each subcommand lives in its own module, which declares it as ``COMMAND``
(a :class:`pipeline.command.Command`: name, --help texts, flags, and ``run(args) -> int``,
the exit code). :func:`dispatch` turns the errors every command shares into
exit codes (a bad setting: one line, 2; Ctrl-C: 130). :func:`entry` ends the
process with that code; ``ingest`` (the console script), ``python -m pipeline.cli``,
``python -m ingress``, ``python -m workers.cli`` and ``python -m replay.cli``
all end through it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from pipeline.command import Command

# Subcommand modules, in --help order. Imported lazily so `ingest stack status`
# does not pay for the Temporal worker imports.
COMMANDS = [
    "pipeline.stack.manager",
    "pipeline.migrate_cmd",
    "pipeline.temporal_setup",
    "pipeline.run_cmd",
    "ingress.cli",
    "router.cli",
    "replay.cli",
    "workers.cli",
    "definitions.cli",
    "scheduler.cli",
    "ops.cli",
    "workers.permits.cli",
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


def dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; the errors every command shares become exit codes."""
    from pipeline.settings import ConfigError

    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"ingest {args.command}: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def main(argv: list[str] | None = None) -> int:
    """``ingest [COMMAND ...]`` in-process: parse, dispatch, return the exit code."""
    return dispatch(build_parser().parse_args(argv))


def run_one(command: Command, argv: list[str] | None = None) -> int:
    """One subcommand on its own (``python -m ingress ...``): the same flags and exit
    codes as ``ingest COMMAND ...``, without importing the other subcommands."""
    parser = argparse.ArgumentParser(prog="ingest")
    command.add_to(parser.add_subparsers(dest="command", required=True))
    return dispatch(parser.parse_args([command.name, *(sys.argv[1:] if argv is None else argv)]))


def exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code, also when it raised (argparse's SystemExit, a crash)."""
    try:
        return run()
    except SystemExit as exc:  # --help, a usage error
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def end_process(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process at once with ``code``.

    Why ``os._exit`` instead of returning to the interpreter: a command that opened
    a Temporal client leaves threads of the SDK's Rust runtime alive (temporalio
    sdk-python #300). While the interpreter finalises, one of them may still call
    into Python, and the process dies with SIGABRT (``Fatal Python error:
    PyGILState_Release ... Python runtime state: finalizing``) after the command
    has done its work and printed its result: a caller sees exit -6 instead of 0.
    ``os._exit`` skips finalisation, so the exit code is always the command's own.
    What finalisation would still have done is done here first: flush the standard
    streams. Every command closes its clients, pools and files itself.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken pipe: nothing more can be written
            pass
    os._exit(code)


def entry() -> NoReturn:
    """The ``ingest`` console script."""
    end_process(exit_code(main))


def entry_one(command: Command) -> NoReturn:
    """A ``python -m <package>`` entry point for one subcommand."""
    end_process(exit_code(lambda: run_one(command)))


if __name__ == "__main__":
    entry()
