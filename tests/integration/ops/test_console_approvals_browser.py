"""The console's "Waiting approvals" view in headless Chromium (selenium): it lists the
waiting approval with its deciders and deadline; signed in with mallory's token (not
listed) a decision is refused in place (the operator stays signed in); signed in again
with alice's token, approving lets the run go on, and the console shows it succeed.
The page has no "decide as" field any more: who decides is who the token names."""

from __future__ import annotations

import asyncio
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from schemas.ids import task_workflow_id
from tests.support import wait
from workers.approvals.part import approval_part
from workers.parts import core_part

from .conftest import PEOPLE, event_run, insert_activity, start_run
from .test_console_browser import signed_in, text_when

APPROVAL = {
    "type": "approval",
    "payload": {"partner": "acme", "amount": 900},
    "config": {"approvers": ["alice"], "sla_seconds": 3600, "escalate_to": "carol"},
}


def drive(url: str, task_id: str, shots: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    with signed_in(url, shots, token=PEOPLE["mallory"]) as (browser, wait):
        card = (By.CSS_SELECTOR, f'.approval[data-task-id="{task_id}"]')
        wait.until(ec.visibility_of_element_located(card))
        found = browser.find_element(*card)
        seen["card"] = found.text
        seen["by_fields"] = str(len(found.find_elements(By.NAME, "by")))
        found.find_element(By.CSS_SELECTOR, "button.approve").click()
        refusal = (By.CSS_SELECTOR, f'.approval[data-task-id="{task_id}"] .msg')
        seen["refused"] = text_when(wait, refusal, lambda t: "may not decide" in t)
        seen["still_signed_in"] = str(
            not browser.find_element(By.ID, "app").get_attribute("hidden")
        )
        browser.find_element(By.ID, "logout").click()
        wait.until(ec.visibility_of_element_located((By.ID, "token"))).send_keys(PEOPLE["alice"])
        browser.find_element(By.ID, "login-button").click()
        wait.until(lambda b: "decide as alice" in b.find_element(*card).text)
        seen["whoami"] = browser.find_element(By.ID, "whoami").text
        browser.save_screenshot(str(shots / "console-approval.png"))
        browser.find_element(*card).find_element(By.CSS_SELECTOR, "button.approve").click()
        flash = (By.ID, "approval-flash")
        seen["answer"] = text_when(wait, flash, lambda t: "approved by alice" in t)
        wait.until(lambda b: b.find_elements(By.ID, "no-approvals"))
        run_status = (By.CSS_SELECTOR, ".run-detail .run-status")
        seen["run_status"] = text_when(wait, run_status, lambda t: t == "succeeded")
        browser.save_screenshot(str(shots / "console-approved.png"))
    return seen


async def test_console_approves_a_waiting_approval_in_headless_chromium(
    cfg, temporal, db_pool, topics, worker, ops_api, tmp_path
):
    activity_id = await insert_activity(db_pool, [APPROVAL, {"type": "noop"}])
    run = event_run(activity_id)
    task_id = task_workflow_id(run.run_id, "approval", 0)
    async with worker(parts=(core_part, approval_part), emit_topic=topics.out):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)

        async def listed() -> bool:
            body = await ops_api.json("GET", "/api/approvals")
            return any(a["task_id"] == task_id for a in body["approvals"])

        await wait.eventually(listed, 60, "the approval to be listed")
        seen = await asyncio.to_thread(drive, ops_api.url, task_id, tmp_path)
        result = await asyncio.wait_for(handle.result(), 60)

    assert "deciders: alice · escalation: carol" in seen["card"]
    assert "deadline (escalation)" in seen["card"] and '"partner": "acme"' in seen["card"]
    assert "decide as mallory" in seen["card"] and seen["by_fields"] == "0"
    assert "'mallory' may not decide" in seen["refused"]
    assert seen["whoami"] == "signed in as alice"
    assert seen["still_signed_in"] == "True"
    assert seen["answer"].startswith(f"{task_id} approved by alice")
    assert seen["run_status"] == "succeeded" and result.status == "succeeded"
    assert (
        await db_pool.fetchval(
            "SELECT actor FROM approval_events WHERE task_id = $1 AND kind = 'decision'", task_id
        )
        == "alice"
    )
    for name in ("console-approval.png", "console-approved.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
    print(f"screenshots: {tmp_path}")
