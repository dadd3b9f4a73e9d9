"""``python -m ingress``: the same as ``ingest ingress``, without loading the other subcommands.

Useful in slim images and in tests that must not depend on the router or
worker packages importing cleanly.
"""

from __future__ import annotations

from ingress.cli import COMMAND
from pipeline.cli import entry_one

if __name__ == "__main__":
    entry_one(COMMAND)
