"""The soak's knobs, read once from the environment (test knobs, not pipeline settings).

* ``SOAK_MINUTES`` (60): how long events flow, the ceiling burst at the start included.
* ``SOAK_FAULT_EVERY`` (s): one fault this often; 300 for runs of 30 minutes or more,
  else 60, so a short run still sees several kinds. A long run's first fault comes after
  half of it (:attr:`Knobs.first_fault`).
* ``SOAK_WINDOW`` (s): the length of one row of the figures; 300 for runs of 30 minutes
  or more, else 60.
* ``SOAK_RATE`` (events/s): a fixed rate instead of half of the ceiling measured at the
  start (the burst is then skipped).
* ``SOAK_FAULTS``: a comma-separated list of fault kinds to rotate through instead of
  :data:`tests.soak.faults.ROTATION`.
* ``SOAK_MEMPROBE``: a comma-separated list of pipeline kinds (``worker,router``) whose
  memory is broken down every ``SOAK_MEMPROBE_EVERY`` s (30) into ``memprobe-<kind>.jsonl``
  (``tests/soak/memprobe/sitecustomize.py``); ``SOAK_MEMPROBE_FRAMES`` > 0 also traces
  allocations with that many frames (slower, and it adds memory of its own).
* ``SOAK_PIPELINE_ENV``: ``NAME=value`` pairs, comma-separated, in the environment of every
  pipeline process (``INGEST_MAX_CACHED_WORKFLOWS=250``): a setting tried under the soak.
  An ``LD_PRELOAD`` (another allocator) must name files that exist: ld.so would only warn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FULL_MINUTES = 30.0  # from this length on, the invariants are asserted at full strength


@dataclass(frozen=True)
class Knobs:
    minutes: float
    fault_every: float
    window: float
    rate: float | None
    faults: tuple[str, ...] | None
    memprobe: tuple[str, ...] = ()
    memprobe_every: float = 30.0
    memprobe_frames: int = 0
    pipeline_env: tuple[tuple[str, str], ...] = ()

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def full(self) -> bool:
        """A long run: the RSS and p99-recovery bounds are asserted as the issue states."""
        return self.minutes >= FULL_MINUTES

    @property
    def first_fault(self) -> float:
        """Seconds from the start to the first fault: half an interval in a long run, so an
        hour at one fault per 5 minutes has room for 12 faults, one of each kind; a whole
        interval in a short one (its first minute is the burst and its drain)."""
        return self.fault_every / 2 if self.full else self.fault_every

    @property
    def toxic_seconds(self) -> float:
        """How long a network toxic stays: 60 s in a full run, a third of the interval
        in a short one."""
        return min(60.0, self.fault_every / 3)


def _float(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


def _names(env: dict[str, str], name: str) -> tuple[str, ...]:
    return tuple(f.strip() for f in env.get(name, "").split(",") if f.strip())


def _pairs(env: dict[str, str], name: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in _names(env, name):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{name}: {item!r} is not NAME=value")
        pairs.append((key.strip(), value.strip()))
        # ld.so only warns about a preload it cannot find and runs on without it: a soak
        # meant for another allocator would measure glibc's and say nothing.
        if key.strip() == "LD_PRELOAD":
            for lib in value.replace(":", " ").split():
                if not os.path.exists(lib):
                    raise ValueError(f"{name}: LD_PRELOAD names {lib}, which does not exist")
    return tuple(pairs)


def load(env: dict[str, str] | None = None) -> Knobs:
    env = dict(os.environ) if env is None else env
    minutes = _float(env, "SOAK_MINUTES", 60.0)
    long_run = minutes >= FULL_MINUTES
    rate = env.get("SOAK_RATE", "").strip()
    faults = _names(env, "SOAK_FAULTS")
    return Knobs(
        minutes=minutes,
        fault_every=_float(env, "SOAK_FAULT_EVERY", 300.0 if long_run else 60.0),
        window=_float(env, "SOAK_WINDOW", 300.0 if long_run else 60.0),
        rate=_float(env, "SOAK_RATE", 1.0) if rate else None,
        faults=faults or None,
        memprobe=_names(env, "SOAK_MEMPROBE"),
        memprobe_every=_float(env, "SOAK_MEMPROBE_EVERY", 30.0),
        memprobe_frames=int(env.get("SOAK_MEMPROBE_FRAMES", "").strip() or 0),
        pipeline_env=_pairs(env, "SOAK_PIPELINE_ENV"),
    )
