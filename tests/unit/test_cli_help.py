"""``ingest --help`` sends the reader to the page that lists the variables."""

from __future__ import annotations

import re

from app.cli import build_parser
from tests.support import ROOT


def test_help_names_the_page_that_lists_the_variables() -> None:
    text = " ".join(build_parser().format_help().split())
    pages = re.findall(r"\b([\w/-]+\.md)\b", text)
    assert pages, f"ingest --help names no docs page: {text}"
    for page in pages:
        doc = ROOT / page
        assert doc.is_file(), f"ingest --help names {page}, which does not exist"
        for var in ("KAFKA_BOOTSTRAP_SERVERS", "TEMPORAL_ADDRESS", "DATABASE_URL"):
            assert f"| `{var}` |" in doc.read_text(), f"{page} does not list {var}"
