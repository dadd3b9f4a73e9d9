"""Free TCP ports for processes a test starts."""

from __future__ import annotations

import contextlib
import socket


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports nothing listens on right now (the OS picks them).

    Every socket stays bound until all ``n`` are chosen, so the OS cannot hand
    the same port out twice. Calling ``free_port()`` ``n`` times can: each port
    is released before the next bind, and a port the kernel just freed may come
    back (CI once drew ``(44653, 44653)`` for one Kafka node's two listeners).
    """
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    return free_ports(1)[0]


def free_port_base(offsets: list[int], lo: int = 20000, hi: int = 32000, tries: int = 200) -> int:
    """A base port ``P`` such that every ``P + offset`` is free right now.

    For a server whose ports are fixed offsets of one setting (the real Temporal
    server's: ``devstack.temporal_server``). All of them are held bound while
    checked, as in :func:`free_ports`.
    """
    import random

    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(lo, hi)
        with contextlib.ExitStack() as stack:
            try:
                for off in offsets:
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", base + off))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no free run of ports {offsets} in {lo}-{hi} after {tries} tries")
