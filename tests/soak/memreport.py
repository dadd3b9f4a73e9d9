"""Read a soak's ``memprobe-<kind>.jsonl`` (``SOAK_MEMPROBE``): where the memory went.

``python -m tests.soak.memreport FILE [FAULTS_LOG]`` prints one row per probe line, in
MB: RSS; pymalloc's arenas (1 MiB each), the bytes in its used blocks and in its free
ones; glibc's heap, its used and free bytes and its mmapped blocks; and the object types
whose count grew most from the first line of the process to its last. With the soak's
``faults.log`` each row says which fault had last begun.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.soak.analysis import Fault
from tests.soak.rescore import load_faults

MB = 1e6
COLUMNS = (
    ("rss", "rss"),
    ("py arenas", "py_arenas"),
    ("py used", "py_used"),
    ("py free", "py_free"),
    ("malloc heap", "malloc_heap"),
    ("malloc used", "malloc_used"),
    ("malloc free", "malloc_free"),
    ("mmap", "malloc_mmap"),
)


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _faults(path: Path | None, rows: list[dict[str, Any]]) -> list[Fault]:
    """Every fault in ``faults.log`` (``rescore.load_faults``: a run over midnight too)."""
    if path is None or not rows:
        return []
    return load_faults(path, rows[0]["t"])


def _value(row: dict[str, Any], key: str) -> str:
    v = row.get(key)
    if v is None or v < 0:
        return "-"
    return f"{v:.0f}" if key == "py_arenas" else f"{v / MB:.1f}"


def table(rows: Iterable[dict[str, Any]], faults: list[Fault]) -> str:
    lines = ["| time | pid | " + " | ".join(c for c, _ in COLUMNS) + " | last fault |"]
    lines.append("|" + "---|" * (len(COLUMNS) + 3))
    for row in rows:
        if "error" in row:
            lines.append(f"| error | {row['pid']} | {row['error']} |")
            continue
        # local time, as faults.log and the processes' logs stamp their lines
        clock = datetime.fromtimestamp(row["t"]).strftime("%H:%M:%S")
        last = [f.kind for f in faults if f.start <= row["t"]]
        cells = " | ".join(_value(row, key) for _, key in COLUMNS)
        lines.append(f"| {clock} | {row['pid']} | {cells} | {last[-1] if last else ''} |")
    return "\n".join(lines)


def object_growth(rows: list[dict[str, Any]], top: int = 12) -> str:
    """Per process, the types whose live count grew most from its first line to its last."""
    out = []
    for pid in dict.fromkeys(r["pid"] for r in rows if "objects" in r):
        mine = [r for r in rows if r["pid"] == pid and "objects" in r]
        first, last = mine[0]["objects"], mine[-1]["objects"]
        grew = sorted(
            ((last.get(k, 0) - first.get(k, 0), k) for k in set(first) | set(last)), reverse=True
        )
        out.append(f"pid {pid}: " + ", ".join(f"{k} {d:+d}" for d, k in grew[:top] if d))
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    rows = load(Path(argv[0]))
    faults = _faults(Path(argv[1]) if len(argv) > 1 else None, rows)
    print(table(rows, faults))
    print()
    print(object_growth(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
