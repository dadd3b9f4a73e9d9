import asyncio

from bench.cli import parse_args
from bench.e2e import run as e2e

parse_args(
    e2e.__doc__,
    {k: v for k, v in e2e.E2E_ENV.items() if k != "BENCH_E2E_TASKS"},
)
asyncio.run(e2e.run())
