"""``ingest``: the single console script. Each subcommand lives in its own module.

A module registers itself with ``add_parser(subparsers)`` and sets ``func`` on
its parser; ``func(args) -> int`` is the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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
            "Configuration comes from environment variables (see README) and flags."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and f"{name}.".startswith(f"{exc.name}."):  # not built yet
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from pipeline.settings import ConfigError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"ingest {args.command}: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
