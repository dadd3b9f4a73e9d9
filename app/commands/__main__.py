"""``python -m app.commands NAME [flags]``: one subcommand, the same as ``ingest NAME
[flags]``, without importing the others (a lean container entry point; tests that must
not depend on another package importing cleanly)."""

from __future__ import annotations

import importlib
import sys

from app.dispatch import entry_one

if __name__ == "__main__":
    if len(sys.argv) < 2 or not sys.argv[1].isidentifier():
        sys.exit(
            "usage: python -m app.commands NAME [flags]   (NAME: ingress, router, worker, ...)"
        )
    name = sys.argv.pop(1)
    entry_one(importlib.import_module(f"app.commands.{name}").COMMAND)
