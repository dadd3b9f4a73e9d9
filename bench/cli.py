"""The command line of every benchmark entry point: ``--help`` says what it measures
(its module docstring), its flags and the environment variables it reads, and exits
without running anything.

Each entry point calls :func:`parse_args` first thing under ``__main__``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence

STACK = (
    "The stack comes from the pipeline's own settings (KAFKA_BOOTSTRAP_SERVERS, "
    "TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, DATABASE_URL; docs/configuration.md), "
    "the local stack's addresses unless set. Figures go to bench/results/<name>.json."
)


def _prog() -> str:
    """``python -m bench.x`` for the module being run (``bench.e2e`` for its __main__)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None else sys.argv[0]
    return f"python -m {name}"


def parse_args(
    doc: str | None,
    env: Mapping[str, str] | None = None,
    *,
    stack: bool = True,
    flags: Callable[[argparse.ArgumentParser], object] | None = None,
    argv: Sequence[str] | None = None,
) -> argparse.Namespace:
    """Parse the entry point's arguments; ``--help`` prints ``doc``, the ``flags`` that
    ``flags`` adds, ``env`` (variable -> what it sets) and, if it talks to the stack
    (``stack``), where the stack's addresses come from; then exits 0."""
    lines = [f"  {name:<26} {what}" for name, what in (env or {}).items()]
    epilog = "environment variables:\n" + "\n".join(lines) if lines else ""
    if stack:
        stack_note = textwrap.fill(STACK, 88)
        epilog = f"{epilog}\n\n{stack_note}" if epilog else stack_note
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description=doc,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if flags is not None:
        flags(parser)
    return parser.parse_args(argv)
