import asyncio

from bench.cli import parse_args
from bench.e2e import run as e2e

args = parse_args(
    e2e.__doc__,
    {k: v for k, v in e2e.E2E_ENV.items() if k != "BENCH_E2E_TASKS"},
    flags=e2e.flags,
)
asyncio.run(e2e.run(temporal=args.temporal, shards=args.shards, server_shape=args.server_shape))
