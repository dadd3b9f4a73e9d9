"""Read metrics, and fail when the metric does not exist.

A scraper that answers 0.0 for a series it cannot find lets ``started == 0``
pass after a rename. Here an unknown metric family always fails; a known family
without the labelled series is 0 only where the caller says so (``missing_ok``):
a labelled counter has no series until it is first incremented.
"""

from __future__ import annotations

import re

import httpx
from prometheus_client import REGISTRY

_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum")


def _family(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def metric_value(name: str, *, missing_ok: bool = False, **labels: str) -> float:
    """The in-process value of sample ``name{labels}`` (prometheus_client's registry)."""
    families = {m.name for m in REGISTRY.collect()}
    if _family(name) not in families and name not in families:
        raise AssertionError(f"metric {name} is not registered")
    value = REGISTRY.get_sample_value(name, labels)
    if value is None:
        if missing_ok:
            return 0.0
        raise AssertionError(f"no sample {name}{labels}")
    return value


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str, name: str, *, missing_ok: bool = False, **labels: str) -> float:
    """Sum of the samples ``name`` whose labels include ``labels`` in exposition ``text``.

    Fails when ``name``'s family is not declared (``# TYPE``), and when no sample
    matches unless ``missing_ok``.
    """
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    if _family(name) not in declared and name not in declared:
        raise AssertionError(f"metric {name} is not exposed")
    total, found = 0.0, False
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        have = dict(_LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
            found = True
    if not found and not missing_ok:
        raise AssertionError(f"no sample {name}{labels} exposed")
    return total


async def scrape(port: int, name: str, *, missing_ok: bool = False, **labels: str) -> float:
    """:func:`parse` applied to ``http://127.0.0.1:{port}/metrics``."""
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    resp.raise_for_status()
    return parse(resp.text, name, missing_ok=missing_ok, **labels)


async def healthy(port: int) -> bool:
    """``/healthz`` answers 200 on ``port``."""
    try:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return r.status_code == 200
    except httpx.HTTPError:
        return False


async def readyz(port: int) -> tuple[int, str]:
    """``/readyz`` on ``port``: the status and the body (0 and the error when nothing
    answered: a process that does not answer is not ready)."""
    try:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
            return r.status_code, r.text
    except httpx.HTTPError as exc:
        return 0, f"{type(exc).__name__}: {exc}"


async def is_ready(port: int) -> bool:
    """``/readyz`` answers 200 on ``port`` (for ``wait.eventually``)."""
    return (await readyz(port))[0] == 200


def metric_sum(name: str, variants: list[dict[str, str]], *, missing_ok: bool = False) -> float:
    """Sum of ``name`` over label ``variants`` (e.g. the two dedupe layers). Fails when
    none of them has a series, unless ``missing_ok`` (a "before" reading)."""
    values = [metric_value(name, missing_ok=True, **labels) for labels in variants]
    if not missing_ok and all(REGISTRY.get_sample_value(name, v) is None for v in variants):
        raise AssertionError(f"no sample {name} for any of {variants}")
    return sum(values)


def router_duplicates(missing_ok: bool = False) -> float:
    """In-process router duplicates suppressed for events, both layers (ledger, Temporal)."""
    variants = [
        {"component": "router", "trigger": "event", "layer": layer}
        for layer in ("ledger", "temporal")
    ]
    return metric_sum("pipeline_duplicates_suppressed_total", variants, missing_ok=missing_ok)
