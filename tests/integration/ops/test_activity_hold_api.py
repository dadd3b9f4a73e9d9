"""Pausing an activity from the ops API and the console (headless Chromium): the token
is required, a pause holds the runs started meanwhile, a resume wakes them."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
from selenium.webdriver.common.by import By

from tests.support import db
from tests.support.runs import event_run, start_run, worker_factory
from tests.support.wait import eventually

from .test_console_browser import signed_in


async def test_pause_and_resume_need_the_token(ops_api):
    async with httpx.AsyncClient(base_url=ops_api.url, timeout=30) as anonymous:
        for method, path in [("GET", "/api/activities"),
                             ("POST", "/api/activities/x/pause"),
                             ("POST", "/api/activities/x/resume")]:  # fmt: skip
            resp = await anonymous.request(method, path, json={})
            assert resp.status_code == 401, (path, resp.status_code)
    await ops_api.json("POST", "/api/activities/no-such/pause", want=404, json={})


async def test_pause_holds_new_runs_and_resume_starts_them(cfg, temporal, db_pool, ops_api):
    aid = await db.seed_activity(db_pool, f"hold.{uuid.uuid4().hex[:8]}")
    got = await ops_api.json(
        "POST", f"/api/activities/{aid}/pause", as_="ann", json={"reason": "deploy"}
    )
    assert (got["changed"], got["paused_by"], got["reason"], got["held_runs"]) == (
        True, "ann", "deploy", 0,
    )  # fmt: skip
    assert got["schedule"] == []  # an event activity has no schedule
    runs = [event_run(aid) for _ in range(2)]
    async with worker_factory(cfg, temporal, db_pool)():
        handles = [await start_run(temporal, r, cfg.temporal.task_queue) for r in runs]

        async def both_held() -> bool:
            listed = await ops_api.json("GET", "/api/activities")
            (mine,) = [a for a in listed["activities"] if a["id"] == aid]
            return bool(mine["held_runs"] == 2 and mine["paused_by"] == "ann")

        await eventually(both_held, 60, "2 held")
        got = await ops_api.json("POST", f"/api/activities/{aid}/resume", as_="ann", json={})
        keys = ("was_paused", "held_runs", "resumed", "skipped", "signalled")
        assert [got[k] for k in keys] == [True, 2, 2, 0, 2], got
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    assert [r.status for r in results] == ["succeeded"] * 2


def _click_pause(url: str, shots: Path, aid: str) -> str:
    with signed_in(url, shots) as (browser, wait):
        row = f'#holds tr.hold[data-activity="{aid}"]'
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, row))
        browser.find_element(By.CSS_SELECTOR, f"{row} button").click()
        wait.until(lambda b: "paused" in b.find_element(By.CSS_SELECTOR, row).text)
        wait.until(
            lambda b: b.find_elements(
                By.XPATH, f"//tr[@data-activity='{aid}']//button[text()='Resume']"
            )
        )
        return str(browser.find_element(By.ID, "holds-count").text)


async def test_console_pauses_an_activity(db_pool, ops_api, tmp_path):
    aid = await db.seed_activity(db_pool, f"hold.{uuid.uuid4().hex[:8]}")
    count = await asyncio.to_thread(_click_pause, ops_api.url, tmp_path, aid)
    assert count == "1 paused"
    by = await db_pool.fetchval("SELECT paused_by FROM activities WHERE id = $1::uuid", aid)
    assert by == "ops-token"  # the console signed in with the shared token
