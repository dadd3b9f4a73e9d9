"""The web console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by .ci/run) driven by selenium.

It signs in with the token, sees the blocked task with its error and payload,
submits a fix through the form, and sees the run succeed. Screenshots are saved
under the test's tmp dir (docs/ops-console.png in the README is one of them).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

import orjson
from aiokafka import AIOKafkaProducer
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from .conftest import TOKEN, charge_registry

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1100",
]


def chromium(profile: Path) -> webdriver.Chrome:
    for path in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(path), f"{path} is missing: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    # An explicit driver path: selenium never tries to download one.
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


@contextmanager
def signed_in(
    url: str, shots: Path, sign_in: bool = True, token: str = TOKEN
) -> Iterator[tuple[webdriver.Chrome, WebDriverWait]]:
    """A fresh headless Chromium signed in to the console at ``url`` with ``token`` (the
    shared one by default; or only on its page, ``sign_in=False``), with a wait.

    On failure it saves ``failure.png`` and ``failure.html`` under ``shots`` and
    raises with the browser's console log; the browser is always closed.
    """
    with tempfile.TemporaryDirectory() as profile:
        browser = chromium(Path(profile))
        try:
            # The console re-renders every few seconds: look elements up afresh each poll.
            wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
            browser.get(url)
            if sign_in:
                wait.until(ec.visibility_of_element_located((By.ID, "token"))).send_keys(token)
                browser.find_element(By.ID, "login-button").click()
            yield browser, wait
        except Exception as exc:
            browser.save_screenshot(str(shots / "failure.png"))  # to see what went wrong
            (shots / "failure.html").write_text(browser.page_source)
            logs = browser.get_log("browser")
            raise AssertionError(f"console test failed; see {shots}; browser log: {logs}") from exc
        finally:
            browser.quit()


def text_when(wait: WebDriverWait, locator: tuple[str, str], holds: Callable[[str], bool]) -> str:
    """The element's text, read in the same poll that sees ``holds`` true of it.

    Waiting for a text and then reading it again is a race: the console re-renders every
    few seconds, so the element found by the wait may be gone by the read (stale)."""

    def settled(browser: webdriver.Chrome) -> str | bool:
        text = browser.find_element(*locator).text
        return text if holds(text) else False

    text = wait.until(settled)
    assert isinstance(text, str)
    return text


def drive(url: str, task_id: str, shots: Path) -> dict[str, str]:
    """The operator's session, step by step (blocking: runs in a thread)."""
    seen: dict[str, str] = {}
    with signed_in(url, shots) as (browser, wait):
        card = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, f'.task[data-task-id="{task_id}"]'))
        )
        seen["error"] = card.find_element(By.CLASS_NAME, "error").text
        seen["payload"] = card.find_element(By.CLASS_NAME, "payload").text
        wait.until(lambda b: "(1)" in b.find_element(By.ID, "dlq-reasons").text)
        patch = card.find_element(By.NAME, "patch")
        patch.clear()
        patch.send_keys('{"amount": 10}')
        browser.save_screenshot(str(shots / "console-blocked.png"))
        card.find_element(By.CSS_SELECTOR, "button.fix").click()
        seen["answer"] = text_when(wait, (By.ID, "flash"), lambda t: "accepted" in t)
        wait.until(lambda b: b.find_elements(By.ID, "no-blocked"))
        run_status = (By.CSS_SELECTOR, ".run-detail .run-status")
        seen["run_status"] = text_when(wait, run_status, lambda t: t == "succeeded")
        seen["token_in_page"] = str(TOKEN in browser.page_source)
        browser.save_screenshot(str(shots / "console-fixed.png"))
    return seen


async def dead_letter(cfg) -> None:  # type: ignore[no-untyped-def]
    """Two DLQ messages, so the DLQ section has reasons to show."""
    producer = AIOKafkaProducer(bootstrap_servers=cfg.kafka.bootstrap_servers)
    await producer.start()
    try:
        for reason, value in (("invalid_json", b"{not json"), ("missing_event_id", b'{"a": 1}')):
            headers = [
                ("dlq_reason", reason.encode()),
                ("dlq_component", b"ingress"),
                ("dlq_detail", f"demo: {reason}".encode()),
            ]
            await producer.send_and_wait(cfg.kafka.dlq_topic, value, headers=headers)
    finally:
        await producer.stop()


async def test_console_fix_through_the_form_in_headless_chromium(
    cfg, db_pool, worker, ops_api, paused_task, tmp_path
):
    await dead_letter(cfg)
    async with worker(registry=charge_registry()):
        p = await paused_task(amount="ten")
        seen = await asyncio.to_thread(drive, ops_api.url, p.task_id, tmp_path)
        result = await asyncio.wait_for(p.handle.result(), 60)
    assert "amount must be a non-negative number, got 'ten'" in seen["error"]
    assert orjson.loads(seen["payload"])["amount"] == "ten"
    assert seen["answer"].startswith(f"fix #1 accepted for charge {p.task_id}")
    assert seen["run_status"] == "succeeded"
    assert seen["token_in_page"] == "False"
    assert result.status == "succeeded"
    fix = await db_pool.fetchrow(
        "SELECT actor, patch FROM task_fixes WHERE task_id = $1", p.task_id
    )
    # Signed in with the shared token: its identity, whatever the page could send.
    assert (fix["actor"], orjson.loads(fix["patch"])) == ("ops-token", {"amount": 10})
    for name in ("console-blocked.png", "console-fixed.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
    print(f"screenshots: {tmp_path}")


# --- layout and sign-in (issue 21: a 5,057 px page, the app under the sign-in card) -----
# (The console under its CSP, the #token= link and another origin: test_console_csp_browser.py)

LONG = 4096  # characters of one DLQ value, the most the API shows of one


async def long_dead_letter(cfg) -> None:  # type: ignore[no-untyped-def]
    """One DLQ message as ingress writes it for a 4,096-byte CloudEvent whose
    ``specversion`` is a single 4,045-character word: the value, and a detail that quotes
    the word (reason and detail from the envelope parser itself)."""
    from schemas.envelope import EnvelopeError, parse

    event = {"specversion": "1." + "0" * 4043, "id": "a", "type": "t", "source": "s"}
    value = orjson.dumps(event)
    assert len(value) == LONG
    try:
        parse(value)
    except EnvelopeError as exc:
        reason, detail = exc.reason, exc.detail
    assert event["specversion"] in detail
    producer = AIOKafkaProducer(bootstrap_servers=cfg.kafka.bootstrap_servers)
    await producer.start()
    try:
        headers = [("dlq_reason", reason.encode()), ("dlq_component", b"ingress"),
                   ("dlq_detail", detail.encode())]  # fmt: skip
        await producer.send_and_wait(cfg.kafka.dlq_topic, value, headers=headers)
    finally:
        await producer.stop()


class Layout(TypedDict, total=False):
    """What :func:`layout` saw, filled in as it walks the pages (CSS pixels)."""

    signed_out_app_displayed: bool
    window: int
    page: int
    started_right: float


def layout(url: str, shots: Path) -> Layout:
    """Signed out, then signed in with the long DLQ value on the page: what is displayed,
    and how wide the page is against the window."""
    seen: Layout = {}
    with signed_in(url, shots, sign_in=False) as (browser, wait):
        wait.until(ec.visibility_of_element_located((By.ID, "token")))
        seen["signed_out_app_displayed"] = browser.find_element(By.ID, "app").is_displayed()
        browser.save_screenshot(str(shots / "console-signed-out.png"))
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.ID, "login-button").click()
        value = (By.CSS_SELECTOR, "#dlq-body pre")
        wait.until(lambda b: len(b.find_element(*value).text) >= LONG)
        seen["window"] = browser.execute_script("return window.innerWidth")
        seen["page"] = browser.execute_script("return document.documentElement.scrollWidth")
        started = browser.find_element(By.XPATH, '//section[@id="runs"]//th[text()="started"]')
        seen["started_right"] = browser.execute_script(
            "return arguments[0].getBoundingClientRect().right", started
        )
        browser.save_screenshot(str(shots / "console-long-value.png"))
    return seen


async def test_a_long_value_stays_in_its_box_and_signed_out_shows_no_app(cfg, ops_api, tmp_path):
    await long_dead_letter(cfg)
    seen = await asyncio.to_thread(layout, ops_api.url, tmp_path)
    assert seen["signed_out_app_displayed"] is False
    assert seen["window"] == 1280
    assert seen["page"] <= seen["window"], seen  # no horizontal scroll (less a scroll bar)
    assert 0 < seen["started_right"] <= seen["window"], seen  # every column on screen
    print(f"screenshot: {tmp_path / 'console-long-value.png'}")


# --- a run's trace (issue 37): the run's detail links its trace id to the tracing UI ------


def trace_link(url: str, run_id: str, shots: Path) -> dict[str, str]:
    """Open the run from the runs table; what its trace link says and points to."""
    with signed_in(url, shots) as (browser, wait):
        row = (By.CSS_SELECTOR, f'tr.run[data-run-id="{run_id}"]')
        wait.until(ec.element_to_be_clickable(row)).click()
        link = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, f"#run-{run_id} a.trace-link"))
        )
        browser.save_screenshot(str(shots / "console-trace-link.png"))
        return {
            "href": link.get_attribute("href") or "",
            "text": link.text,
            "title": link.get_attribute("title") or "",
            "target": link.get_attribute("target") or "",
        }


async def test_a_traced_run_links_its_trace(cfg, db_pool, ops_api, tmp_path):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from temporalio.client import Client
    from temporalio.contrib.opentelemetry import TracingInterceptor

    from pipeline import tracing
    from tests.support.runs import event_run, insert_activity, start_run, worker_factory

    # A real run, traced: the worker writes activity_runs.trace_id from its start_run step.
    exporter = InMemorySpanExporter()
    if tracing._provider is None:
        assert tracing.setup(True, "test", exporter=exporter)
    tracing.ENABLED = True
    try:
        base = await Client.connect(cfg.temporal.address, namespace=cfg.temporal.namespace)
        config = base.config()
        config["interceptors"] = [TracingInterceptor(tracing.tracer())]
        traced = Client(**config)
        aid = await insert_activity(db_pool, [{"type": "noop"}])
        run = event_run(aid)
        async with worker_factory(cfg, traced, db_pool)():
            with tracing.tracer().start_as_current_span("console test") as root:
                handle = await start_run(traced, run, cfg.temporal.task_queue)
            assert (await asyncio.wait_for(handle.result(), 60)).status == "succeeded"
    finally:
        tracing.ENABLED = False
    trace_id = f"{root.get_span_context().trace_id:032x}"
    stored = await db_pool.fetchval(
        "SELECT trace_id FROM activity_runs WHERE workflow_id = $1", run.workflow_id
    )
    assert stored == trace_id
    seen = await asyncio.to_thread(trace_link, ops_api.url, run.run_id, tmp_path)
    assert seen["href"] == f"http://127.0.0.1:16686/trace/{trace_id}"  # the default template
    assert seen["text"] == f"trace {trace_id[:8]}…"
    assert seen["title"] == f"trace {trace_id}"
    assert seen["target"] == "_blank"
