"""One ``ingest`` subcommand, declared: its name, its --help texts, its flags and what it runs.

A command module declares ``COMMAND = Command(...)`` instead of building its argparse
parser by hand. :mod:`app.cli` adds every module's ``COMMAND`` to the ``ingest``
parser; ``python -m <package>`` adds only its own (:func:`app.dispatch.entry_one`).

A command with actions (``ingest schedules sync|pause|resume``) declares each action
as a :class:`Command` of its own; the chosen action's name is in
``args.<command>_command`` and its ``run`` is the one called.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Run = Callable[[argparse.Namespace], int]
Flags = Callable[[argparse.ArgumentParser], None]


def no_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command that takes none (only --help)."""


@dataclass(frozen=True)
class Command:
    """``help``: its line in the parent's --help; ``description``: the top of its own.

    ``run(args)`` returns the exit code (None: a command of ``actions`` only);
    ``flags(parser)`` adds its arguments; ``preformatted`` keeps the line breaks
    of the description as written.
    """

    name: str
    help: str
    description: str | None = None
    run: Run | None = None
    flags: Flags = no_flags
    preformatted: bool = False
    actions: tuple[Command, ...] = ()

    def add_to(self, sub: Any) -> argparse.ArgumentParser:
        """Add this command to ``sub`` (what ``add_subparsers()`` returned)."""
        raw = argparse.RawDescriptionHelpFormatter
        p: argparse.ArgumentParser = sub.add_parser(
            self.name,
            help=self.help,
            description=self.description,
            formatter_class=raw if self.preformatted else argparse.HelpFormatter,
        )
        self.flags(p)
        if self.actions:
            actions = p.add_subparsers(dest=f"{self.name}_command", metavar="ACTION", required=True)
            for action in self.actions:
                action.add_to(actions)
        if self.run is not None:
            p.set_defaults(func=self.run)
        return p
