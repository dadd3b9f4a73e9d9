"""The console's DLQ section in headless Chromium, under the peek's byte budget (issue 34):
it says when the budget stopped the peek, lists each message's header count and size, and
shows one message's header values on demand (``GET /api/dlq/{partition}/{offset}``),
kept open across the page's refreshes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import SecretStr
from selenium.webdriver.common.by import By

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from tests.support.kafka import produce

from .conftest import TOKEN
from .test_console_browser import signed_in, text_when

BIG = 900_000


def dlq_section(url: str, shots: Path) -> dict[str, str]:
    with signed_in(url, shots) as (browser, wait):
        count = (By.ID, "dlq-count")
        wait.until(lambda b: "byte budget" in b.find_element(*count).text)
        toggles = browser.find_elements(By.CSS_SELECTOR, "#dlq-body button.headers-toggle")
        seen = {"count": browser.find_element(*count).text, "toggle": toggles[0].text}
        toggles[0].click()
        shown = (By.CSS_SELECTOR, "#dlq-body tr.dlq-headers pre")
        seen["headers"] = text_when(wait, shown, lambda t: "x-original-trace" in t)
        browser.save_screenshot(str(shots / "console-dlq-headers.png"))
        # The page refreshes every 3 s: the open headers stay open.
        before = browser.find_element(By.ID, "updated").text
        wait.until(lambda b: b.find_element(By.ID, "updated").text != before)
        seen["after_refresh"] = browser.find_element(*shown).text
    return seen


async def test_console_shows_the_budget_and_header_values_on_demand(
    cfg, temporal, db_pool, tmp_path
):
    filler = (b"trace " * (BIG // 6 + 1))[:BIG]
    headers = [("x-original-trace", filler), ("ce_type", b"demo.order.created"),
               ("dlq_reason", b"not_json"), ("dlq_component", b"ingress"),
               ("dlq_detail", b"Expecting value: line 1 column 2 (char 1)")]  # fmt: skip
    await produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.dlq_topic,
        [(None, b"{not json %d" % i, headers, i % 3) for i in range(8)],
    )
    ops = OpsSettings(
        host="127.0.0.1",
        port=0,
        token=SecretStr(TOKEN),
        dlq_peek_max_bytes=256 * 1024,
        dlq_peek_read_max_bytes=4 * 1024 * 1024,  # 4 of the 8 records
    )
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    try:
        seen = await asyncio.to_thread(dlq_section, server.url, tmp_path)
    finally:
        await server.stop()
    assert "stopped at the byte budget" in seen["count"] and "not read" in seen["count"], seen
    assert seen["toggle"] == "5 headers, 879 KB", seen
    assert "x-original-trace [879 KB]: trace trace" in seen["headers"], seen
    assert "(first 4,096 bytes)" in seen["headers"]
    assert "ce_type [18 B]: demo.order.created" in seen["headers"]
    assert seen["after_refresh"] == seen["headers"]
    assert (tmp_path / "console-dlq-headers.png").stat().st_size > 10_000
    print(f"screenshot: {tmp_path / 'console-dlq-headers.png'}")
