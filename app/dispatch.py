"""The one way every CLI entry point runs: exit codes, and ending the process.

Each subcommand lives in its own module, which declares it as ``COMMAND``
(a :class:`app.command.Command`: name, --help texts, flags, and ``run(args) -> int``,
the exit code). :func:`dispatch` turns the errors every command shares into
exit codes (a bad setting: one line, 2; Ctrl-C: 130), and :func:`end_process` ends
the process with that code. The ``ingest`` console script (:mod:`app.cli`, which
knows every subcommand), ``python -m app.cli`` and ``python -m app.commands NAME`` (one
subcommand alone) all end through it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from app.command import Command


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
    streams, and export the spans still buffered (tracing on; at most a few seconds).
    Every command closes its clients, pools and files itself.
    """
    from pipeline import tracing

    tracing.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken pipe: nothing more can be written
            pass
    os._exit(code)


def entry_one(command: Command) -> NoReturn:
    """A ``python -m <package>`` entry point for one subcommand."""
    end_process(exit_code(lambda: run_one(command)))
