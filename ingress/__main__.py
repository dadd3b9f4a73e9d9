"""``python -m ingress``: the same as ``ingest ingress``, without loading the other subcommands.

Useful in slim images and in tests that must not depend on the router or
worker packages importing cleanly.
"""

from __future__ import annotations

import argparse
import sys

from ingress.cli import add_parser


def main(argv: list[str] | None = None) -> int:
    from pipeline.settings import ConfigError

    parser = argparse.ArgumentParser(prog="python -m ingress")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["ingress", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"ingest ingress: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
