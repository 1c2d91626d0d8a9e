"""Drives the page in headless Chromium (Debian's chromium + chromedriver, never a downloaded one)."""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "browser"
#: The README's picture of the page; rewritten only when RAG_INGEST_README_SCREENSHOT is set
#: (make readme-screenshot), so a test run never changes the repository.
README_SCREENSHOT = REPO_ROOT / "docs" / "img" / "page.png"
SAMPLES = REPO_ROOT / "samples"
T = TypeVar("T")

# Selenium Manager must never fetch a driver or a browser: the paths below are explicit, and offline.
os.environ["SE_OFFLINE"] = "true"


def new_driver(width: int = 1280, height: int = 1400) -> webdriver.Chrome:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise RuntimeError(f"{CHROMIUM} and {CHROMEDRIVER} are needed: run `make chromium` (Debian packages)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # the test user may be root (containers); the page is our own
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",  # no calls home from the browser itself
        "--disable-component-update",
        "--disable-sync",
        "--metrics-recording-only",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))


class Page:
    """The rag-ingest page in one browser, with the waits and reads the tests share."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, name: str) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/") + "/"
        self.name = name
        self.shots: list[Path] = []
        self.console: list[dict[str, Any]] = []

    # -- basics -----------------------------------------------------------------------------------

    def open(self) -> None:
        self.driver.get(self.base_url)
        self.wait(lambda: self.js("return document.readyState") == "complete", "the page loads")
        self.mark()

    def mark(self) -> None:
        """A value that survives only while the page is not reloaded or navigated away."""
        self.js("window.__testPageMark = 'kept'")

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def js_async(self, script: str, *args: Any) -> Any:
        return self.driver.execute_async_script(script, *args)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait(self, condition: Callable[[], T | None], what: str, timeout: float = 30) -> T:
        """The first truthy value of ``condition`` (polled), or an AssertionError with a screenshot."""

        def probe(_: Any) -> T | None:
            try:
                return condition()
            except (StaleElementReferenceException, LookupError):
                return None

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(probe)  # type: ignore[return-value]
        except WebDriverException as exc:
            self.screenshot(f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())[:40]}")
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}") from exc

    def readme_screenshot(self, anchor: str) -> Path:
        """The window with ``anchor`` (a CSS selector) at its top, as the README shows the page:
        written to the artifacts, and over docs/img/page.png when RAG_INGEST_README_SCREENSHOT is set."""
        self.js("document.querySelector(arguments[0]).scrollIntoView({block: 'start'})", anchor)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-readme.png"
        path.write_bytes(self.driver.get_screenshot_as_png())
        if os.environ.get("RAG_INGEST_README_SCREENSHOT"):
            README_SCREENSHOT.write_bytes(path.read_bytes())
        return path

    def screenshot(self, step: str) -> Path:
        """The whole page (not only the window), as the user would scroll through it."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{len(self.shots) + 1:02d}-{step}.png"
        metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": metrics["width"], "height": metrics["height"], "scale": 1},
            },
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        self.shots.append(path)
        return path

    def not_reloaded(self) -> bool:
        """True while the document loaded by open() is still the one shown (no reload, no navigation)."""
        return bool(
            self.js(
                "return window.__testPageMark === 'kept' && performance.getEntriesByType('navigation').length === 1"
            )
        )

    def stats(self) -> dict[str, Any]:
        return dict(
            self.js(
                "return JSON.parse(JSON.stringify({live: ragIngest.live, polls: ragIngest.polls,"
                " uploads: ragIngest.uploads, searches: ragIngest.searches}))"
            )
        )

    def console_errors(self) -> list[dict[str, Any]]:
        """Browser log entries at SEVERE (console.error, uncaught errors, failed loads) since the last call."""
        entries = self.driver.get_log("browser")
        self.console.extend(entries)
        return [entry for entry in entries if entry.get("level") == "SEVERE"]

    # -- the page's flows ---------------------------------------------------------------------------

    def sign_in(self, username: str, tenant: str) -> None:
        self.wait(lambda: self.find("#local-sign-in").is_displayed(), "the dev-only sign-in form shows")
        for field, value in (("#username", username), ("#tenant", tenant)):
            box = self.find(field)
            box.clear()
            box.send_keys(value)
        self.find("#local-sign-in button[type=submit]").click()
        self.wait(lambda: self.find("#workspace").is_displayed(), "the workspace shows after sign-in")
        self.wait(lambda: self.find("#who-tenant").text == tenant, "the tenant is shown")

    def sign_out(self) -> None:
        self.find("#sign-out").click()
        self.wait(lambda: self.find("#local-sign-in").is_displayed(), "the sign-in form is back")

    def choose_files(self, *paths: Path) -> None:
        self.find("#file-input").send_keys("\n".join(str(path) for path in paths))

    def uploads_in(self, count: int, state: str) -> list[dict[str, Any]] | None:
        """The upload items once there are ``count``, all in ``state``; else None."""
        items = self.upload_items()
        return items if len(items) == count and all(item["state"] == state for item in items) else None

    def upload_items(self) -> list[dict[str, Any]]:
        return list(
            self.js(
                """return [...document.querySelectorAll('#uploads .upload')].map(item => ({
                     name: item.querySelector('.upload-name').textContent,
                     state: item.dataset.state,
                     documentId: item.dataset.documentId || null,
                     progress: item.querySelector('progress') ? item.querySelector('progress').value : null,
                     max: item.querySelector('progress') ? item.querySelector('progress').max : null,
                     status: item.querySelector('.upload-status').textContent}))"""
            )
        )

    def rows(self) -> dict[str, dict[str, Any]]:
        """The documents list as the page shows it, by document id (in page order)."""
        rows = self.js(
            """return [...document.querySelectorAll('#document-rows tr')].map(row => ({
                 id: row.dataset.documentId, status: row.dataset.status,
                 filename: row.querySelector('.filename').textContent,
                 stage: row.querySelector('.stage').textContent,
                 pages: row.querySelector('.pages').textContent,
                 chunks: row.querySelector('.chunks').textContent,
                 duration: row.querySelector('.duration').textContent,
                 sentence: row.querySelector('.failure-sentence')
                   ? row.querySelector('.failure-sentence').textContent : null,
                 errorCode: row.querySelector('.failure') ? row.querySelector('.failure').dataset.errorCode : null,
                 actions: [...row.querySelectorAll('.actions button')].map(b => b.textContent)}))"""
        )
        return {row["id"]: row for row in rows}

    def row_button(self, document_id: str, label: str) -> WebElement:
        buttons = self.find_all(f'#document-rows tr[data-document-id="{document_id}"] .actions button')
        [button] = [b for b in buttons if b.text == label]
        return button

    def search(self, query: str, mode: str = "hybrid", *, ask: bool = False) -> list[dict[str, Any]]:
        """The hits for ``query`` (with ``ask``, the Ask button: the answer box fills too)."""
        before = self.js("return ragIngest.searches")
        box = self.find("#query")
        box.clear()
        box.send_keys(query)
        self.driver.find_element(By.CSS_SELECTOR, f'#mode option[value="{mode}"]').click()
        self.find("#ask" if ask else '#search-form button[value="search"]').click()
        self.wait(lambda: self.js("return ragIngest.searches") > before, f"the search for {query!r} answers", 60)
        return list(
            self.js(
                """return [...document.querySelectorAll('#results .result')].map(item => ({
                     documentId: item.dataset.documentId, pageStart: Number(item.dataset.pageStart),
                     title: item.querySelector('.open-document').textContent,
                     passage: item.querySelector('.passage').textContent,
                     passageHtml: item.querySelector('.passage').innerHTML}))"""
            )
        )

    def page_weight(self) -> dict[str, Any]:
        """Bytes transferred for the first load: the document and every resource it loaded."""
        return dict(
            self.js(
                """const entries = [...performance.getEntriesByType('navigation'),
                                    ...performance.getEntriesByType('resource')];
                   return {entries: entries.map(e => ({name: e.name, transfer: e.transferSize,
                                                       body: e.decodedBodySize})),
                           transferred: entries.reduce((sum, e) => sum + e.transferSize, 0),
                           decoded: entries.reduce((sum, e) => sum + e.decodedBodySize, 0)};"""
            )
        )


def write_figures(figures: dict[str, Any]) -> Path:
    """Figures the browser tests measured (also printed), merged into one JSON file per run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "figures.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(figures)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def elapsed(started: float) -> float:
    return round(time.monotonic() - started, 2)
