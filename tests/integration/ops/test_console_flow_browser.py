"""The console's Flow control section in headless Chromium: a rate-limited activity's key
row and its recorded skip, as ``GET /api/flow`` serves them."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from selenium.webdriver.common.by import By

from router.flow.keys import read_keys
from router.flow.store import FlowStore
from schemas.flow.spec import FlowDef
from schemas.workflow_io import RunActivityInput
from tests.support import db

from .test_console_browser import signed_in

FLOW = {"rate_limit": {"limit": 1, "period": "1h", "key": "data.tenant"}}


def flow_section(url: str, shots: Path) -> dict[str, str]:
    with signed_in(url, shots) as (browser, wait):
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#flow .flow-skip"))
        return {
            "key": browser.find_element(By.CSS_SELECTOR, "#flow .flow-key").text,
            "skip": browser.find_element(By.CSS_SELECTOR, "#flow .flow-skip").text,
            "count": browser.find_element(By.ID, "flow-count").text,
        }


async def test_console_shows_flow_keys_and_skips(cfg, db_pool, ops_api, tmp_path):
    aid = await db.seed_activity(db_pool, f"con.{uuid.uuid4().hex[:8]}", flow=FLOW)
    store, flow = FlowStore(db_pool), FlowDef.model_validate(FLOW)
    for i in range(2):  # the second exceeds 1 per hour: skipped
        event = {"type": "t", "data": {"tenant": "acme"}}
        run = RunActivityInput.for_event(aid, f"con-{i}", event)
        await store.decide(run, read_keys(flow, event))
    seen = await asyncio.to_thread(flow_section, ops_api.url, tmp_path)
    assert "acme" in seen["key"] and f"test {aid}" in seen["key"]
    assert "rate_limit" in seen["skip"] and "con-1" in seen["skip"]
    assert seen["count"] == "1 recent skips"
