"""The console under its Content Security Policy, and a page on another origin, in headless
Chromium (issue 36 part 4; review findings 6 and 12).

* Opened from the link ``ingest ops --insecure-local`` and ``make run`` print
  (``/#token=...``), the console signs in by itself, takes the token out of the address
  bar, shows who it is, and lists what the API holds, with no CSP violation in the
  browser's log. An inline script injected afterwards does not run, and its violation
  is logged: the policy is enforced, and the log would show a violation of the page's
  own.
* A page served by a second local HTTP server (another origin) tries what the review's
  reproduction did: ``fetch`` POSTs in ``no-cors`` mode with a "simple" body, a CORS
  JSON POST, and a cross-origin read. None acts: the activity it tries to pause stays
  unpaused, and it reads nothing. A hostname that resolves to 127.0.0.1 (as DNS
  rebinding makes one) gets the guard's Host refusal, not the console.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from .conftest import TOKEN
from .test_console_browser import CHROMEDRIVER, CHROMIUM, FLAGS

KEY = "ingestOpsToken"  # the console's sessionStorage key
REBIND = "rebind.test"  # resolved to 127.0.0.1 by the browser only


@contextmanager
def browser() -> Iterator[webdriver.Chrome]:
    with tempfile.TemporaryDirectory() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in [*FLAGS, f"--user-data-dir={profile}",
                     f"--host-resolver-rules=MAP {REBIND} 127.0.0.1"]:  # fmt: skip
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()


def _csp_messages(logs: list[dict[str, Any]]) -> list[str]:
    return [
        e["message"] for e in logs
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]  # fmt: skip


def console_session(url: str, aid: str, shots: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with browser() as b:
        try:
            wait = WebDriverWait(b, 60)
            b.get(f"{url}/#token={TOKEN}")
            row = f'#holds tr.hold[data-activity="{aid}"]'
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
            wait.until(lambda d: "updated" in d.find_element(By.ID, "updated").text)
            seen["url"] = b.current_url
            seen["stored"] = b.execute_script(f"return sessionStorage.getItem('{KEY}')")
            seen["whoami"] = b.find_element(By.ID, "whoami").text
            seen["login_shown"] = b.find_element(By.ID, "login").is_displayed()
            b.save_screenshot(str(shots / "console-csp.png"))
            seen["console_log"] = b.get_log("browser")
            # The control: an inline script the page did not ship is refused, and logged.
            b.execute_script(
                "const s = document.createElement('script');"
                "s.textContent = 'window.injected = true;'; document.body.append(s);"
            )
            seen["injected_ran"] = b.execute_script("return window.injected === true")
            seen["control_log"] = b.get_log("browser")
        except Exception as exc:
            b.save_screenshot(str(shots / "failure.png"))
            logs = b.get_log("browser")
            raise AssertionError(f"console test failed; see {shots}; browser log: {logs}") from exc
    return seen


async def test_the_console_works_under_its_csp_from_the_token_link(db_pool, ops_api, tmp_path):
    from tests.support.runs import insert_activity

    aid = await insert_activity(db_pool, [{"type": "noop"}])
    seen = await asyncio.to_thread(console_session, ops_api.url, aid, tmp_path)
    assert TOKEN not in seen["url"] and seen["url"].rstrip("/") == ops_api.url, seen["url"]
    assert seen["stored"] == TOKEN
    assert seen["whoami"] == "signed in as ops-token (shared token)"
    assert seen["login_shown"] is False
    assert _csp_messages(seen["console_log"]) == [], seen["console_log"]
    assert seen["injected_ran"] is False
    assert _csp_messages(seen["control_log"]), seen["control_log"]  # the log would tell


ATTACK = """<!doctype html><html><body><pre id="out">running</pre><script>
const target = "%(target)s", aid = "%(aid)s", results = {};
async function attempt(name, f) {
  try { const r = await f(); results[name] = r.type + " " + r.status; }
  catch (e) { results[name] = "blocked: " + e.name; }
}
(async () => {
  const pause = target + "/api/activities/" + aid + "/pause";
  await attempt("no-cors text", () => fetch(pause, {method: "POST", mode: "no-cors", body: "{}"}));
  await attempt("no-cors blob", () => fetch(pause, {method: "POST", mode: "no-cors",
                                                     body: new Blob(["{}"])}));
  await attempt("no-cors form", () => fetch(pause, {method: "POST", mode: "no-cors",
                                                     body: new URLSearchParams({a: "1"})}));
  await attempt("cors json", () => fetch(pause, {method: "POST", body: "{}",
                                                  headers: {"Content-Type": "application/json"}}));
  await attempt("cors read", () => fetch(target + "/api/activities"));
  document.getElementById("out").textContent = JSON.stringify(results);
  document.title = "done";
})();
</script></body></html>"""


@contextmanager
def attacker_site(target: str, aid: str) -> Iterator[str]:
    page = (ATTACK % {"target": target, "aid": aid}).encode()
    hits: list[str] = []

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
    assert hits, "the attacker page was never loaded"


def other_origin(ops_url: str, attack_url: str, shots: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with browser() as b:
        wait = WebDriverWait(b, 60)
        # The operator is signed in to the console in this browser (its origin's storage).
        b.get(f"{ops_url}/#token={TOKEN}")
        wait.until(lambda d: "updated" in d.find_element(By.ID, "updated").text)
        b.get(attack_url)
        wait.until(lambda d: d.title == "done")
        seen["results"] = b.find_element(By.ID, "out").text
        b.save_screenshot(str(shots / "other-origin.png"))
        port = ops_url.rsplit(":", 1)[1]
        b.get(f"http://{REBIND}:{port}/")  # what a rebound name reaches
        seen["rebound"] = b.find_element(By.TAG_NAME, "body").text
    return seen


async def test_a_page_on_another_origin_cannot_act_on_the_api(db_pool, ops_api, tmp_path):
    import orjson

    from tests.support.runs import insert_activity

    aid = await insert_activity(db_pool, [{"type": "noop"}])
    with attacker_site(ops_api.url, aid) as attack_url:
        seen = await asyncio.to_thread(other_origin, ops_api.url, attack_url, tmp_path)
    results = orjson.loads(seen["results"])
    # no-cors: an opaque answer (status 0), whatever the server said; CORS: blocked.
    for name in ("no-cors text", "no-cors blob", "no-cors form"):
        assert results[name] == "opaque 0", results
    assert results["cors json"].startswith("blocked"), results
    assert results["cors read"].startswith("blocked"), results
    paused = await db_pool.fetchval("SELECT paused_at FROM activities WHERE id = $1::uuid", aid)
    assert paused is None  # nothing changed server-side
    assert "this Host is not served here" in seen["rebound"], seen["rebound"]
    # The same action with the token works: the refusals above were the guard's.
    await ops_api.json("POST", f"/api/activities/{aid}/pause", json={})
    assert await db_pool.fetchval(
        "SELECT paused_at FROM activities WHERE id = $1::uuid", aid
    ) is not None  # fmt: skip
