import asyncio

from bench.e2e.run import run

asyncio.run(run())
