"""A deterministic batch of records from the strategies.

Why ``@given`` + ``@seed`` over one record, run once per kind for its share, and not
``strategy.example()``: ``example()`` draws from a fresh random seed every call (and
Hypothesis warns against it outside the console), so a batch could never be
reproduced. Here a kind's records are the first examples Hypothesis's own engine
generates for a test seeded from ``seed``. Only the *generate* phase runs: no example
database (it would replay earlier runs' examples, different per machine), no explicit
examples and no shrinking (the inner function never fails; the invariant is checked
on the whole batch, on the real pipeline, afterwards). The engine still does what
makes it a better fuzzer than ``random``: it starts from small examples, skips
duplicates, and mutates towards structure it has not produced yet.

In a child process: Hypothesis also draws (5% of the time) literals it finds in the
*local* modules loaded at the time (``hypothesis.internal.conjecture.providers``,
``_get_local_constants``). In the test process that set depends on which tests ran
before and on code others edit, so the same seed would give another batch in
``make test`` than in ``pytest tests/fuzz``. The child loads only this package's
generator modules: the batch is a function of the seed, the Hypothesis version and
``tests/fuzz`` alone. ``make fuzz`` sets ``FUZZ_PROJECT_CONSTANTS=1``: the child then
imports the pipeline's packages first, so their literals (header names, DLQ reasons,
CloudEvents attributes) become values the fuzzer tries too.

``UNIQ`` in a value or header becomes ``{seed}.{index}``, unique per record.
"""

from __future__ import annotations

import importlib
import os
import pickle
import pkgutil
import random
import subprocess
import sys

from tests.fuzz.strategies import UNIQ, FuzzRecord, apportion, records

_UNIQ = UNIQ.encode()
PROJECT_PACKAGES = ("schemas", "ingress", "router", "pipeline", "definitions", "workers")


def _unique(value: bytes | None, token: bytes) -> bytes | None:
    return value.replace(_UNIQ, token) if value else value


def _kind_batch(kind: str, seed: int, n: int) -> list[FuzzRecord]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    out: list[FuzzRecord] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(records(kind))
    def collect(rec: FuzzRecord) -> None:
        out.append(rec)

    collect()
    return out[:n]


def generate_here(seed: int, n: int) -> list[FuzzRecord]:
    """The batch of ``seed``, generated in this process (see the module docstring).

    One seeded run of the engine per kind, for the kind's share of ``n``
    (``strategies.apportion``): every kind is tried in every batch, in its proportion
    (one run over all kinds lets the engine's mutations dwell on a few). The records
    are then shuffled with ``random.Random(seed)``, so kinds mix in every partition."""
    batch: list[FuzzRecord] = []
    for i, (kind, count) in enumerate(sorted(apportion(n).items())):
        batch += _kind_batch(kind, seed * 100 + i, count)
    random.Random(seed).shuffle(batch)
    for i, rec in enumerate(batch):
        token = f"{seed}.{i}".encode()
        rec.value = _unique(rec.value, token)
        rec.headers = [(k, _unique(v, token)) for k, v in rec.headers]
    return batch


def generate(seed: int, n: int, project_constants: bool = False) -> list[FuzzRecord]:
    """The batch of ``seed``: ``n`` records (fewer only if the strategies ran dry),
    generated in a child process that loads nothing but the generator."""
    from tests.support import ROOT

    cmd = [sys.executable, "-m", "tests.fuzz.generate", str(seed), str(n)]
    if project_constants:
        cmd.append("--project-constants")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"generating seed {seed} failed:\n{out.stderr.decode()[-3000:]}")
    batch: list[FuzzRecord] = pickle.loads(out.stdout)
    return batch


def _load_project() -> None:
    for name in PROJECT_PACKAGES:
        pkg = importlib.import_module(name)
        for mod in pkgutil.walk_packages(pkg.__path__, f"{name}."):
            try:
                importlib.import_module(mod.name)
            except Exception:
                continue  # a module that needs more than an import


if __name__ == "__main__":
    if "--project-constants" in sys.argv:
        _load_project()
    records_ = generate_here(int(sys.argv[1]), int(sys.argv[2]))
    sys.stdout.buffer.write(pickle.dumps(records_))
