"""Handlers loaded by name in the registry tests (INGEST_TASK_HANDLERS)."""

from workers.handlers import TaskContext, register


@register("greet")
async def greet(ctx: TaskContext) -> None:
    pass


@register("shout")
async def shout(ctx: TaskContext) -> None:
    pass


# Registered under a name that is not its function name.
@register("salute")
async def greet_formally(ctx: TaskContext) -> None:
    pass


async def plain(ctx: TaskContext) -> None:
    pass


def not_async(ctx: TaskContext) -> None:
    pass


# Not @register-ed: `--handlers tests.unit.workers.handler_fixtures:hang` names it, for a
# test whose worker serves task type "hang" with a handler of its own (`activities apply`
# only takes a type some handler serves).
async def hang(ctx: TaskContext) -> None:
    pass
