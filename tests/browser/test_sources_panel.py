"""The Sources panel in headless Chromium.

Against the in-memory routes of docs/sources.md (tests/support/sources_api.py, which also serves the
page): the list with last syncs, adding an S3 and a web source (the bodies sent), a form refused in
the page, "Sync now" followed by polling GET of the sync until COMPLETE, 409 SYNC_IN_PROGRESS, and
everything from the API shown as text. Against the local stack: an S3 source over a moto bucket
synced from the page to COMPLETE with its documents added. Screenshots: test-artifacts/browser/.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from selenium import webdriver
from selenium.webdriver.support.ui import Select

from local.runtime.harness import OfflineStackProcess
from tests.browser.page import Page
from tests.support.sources_api import SourcesApi, Step

pytestmark = pytest.mark.browser
HOSTILE = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture
def sources_api() -> Iterator[SourcesApi]:
    server = SourcesApi().start()
    yield server
    server.stop()


@pytest.fixture
def standin_page(driver: webdriver.Chrome, sources_api: SourcesApi) -> Page:
    page = Page(driver, sources_api.url, "sources-standin")
    page.open()
    page.sign_in("ana", "acme")
    return page


def open_panel(page: Page) -> None:
    page.find("#sources-details summary").click()
    page.wait(lambda: page.find("#source-form").is_displayed(), "the Sources panel opens")


def fill(page: Page, values: dict[str, str]) -> None:
    for css, value in values.items():
        box = page.find(css)
        if box.tag_name == "select":
            Select(box).select_by_value(value)
        else:
            box.clear()
            box.send_keys(value)


def shown_sources(page: Page) -> list[dict[str, Any]]:
    return list(
        page.js(
            """return [...document.querySelectorAll('#source-list .source')].map(item => ({
                 id: item.dataset.sourceId, kind: item.dataset.kind, lastStatus: item.dataset.lastStatus,
                 name: item.querySelector('.source-title').textContent,
                 where: item.querySelector('.source-where').textContent,
                 stats: Object.fromEntries([...item.querySelectorAll(':scope > .sync-statistics dd')]
                          .map(dd => [dd.dataset.statistic, Number(dd.textContent)])),
                 syncs: [...item.querySelectorAll('.syncs .sync')].map(sync => ({
                   id: sync.dataset.syncId, status: sync.dataset.status,
                   failures: [...sync.querySelectorAll('.sync-failure')].map(f => f.textContent)}))}))"""
        )
    )


def test_sources_are_added_from_the_form_and_listed(standin_page: Page, sources_api: SourcesApi) -> None:
    page = standin_page
    open_panel(page)
    page.wait(lambda: page.find("#sources-empty").is_displayed(), "an empty tenant says it has no sources")

    fill(page, {"#source-bucket": "team-docs", "#source-prefix": "handbook/", "#source-include": "**/*.pdf, *.md",
                "#source-schedule": "rate(1 day)"})  # fmt: skip
    page.find("#source-form button[type=submit]").click()
    page.wait(lambda: len(shown_sources(page)) == 1, "the S3 source is listed")
    fill(page, {"#source-kind": "web"})
    assert not page.find("#source-bucket").is_displayed() and page.find("#source-seeds").is_displayed()
    fill(page, {"#source-seeds": "https://docs.example.com/guide/", "#source-max-pages": "50"})
    page.find("#source-form button[type=submit]").click()
    page.wait(lambda: len(shown_sources(page)) == 2, "the web source is listed")

    posted = [r.body for r in sources_api.requests if r.method == "POST" and r.path == "/sources"]
    assert posted == [
        {"kind": "s3", "name": "s3://team-docs/handbook/", "schedule": "rate(1 day)",
         "config": {"bucket": "team-docs", "prefix": "handbook/", "include": ["**/*.pdf", "*.md"]}},
        {"kind": "web", "name": "docs.example.com",
         "config": {"seeds": ["https://docs.example.com/guide/"], "sitemaps": [], "max_pages": 50}},
    ]  # fmt: skip
    first, second = shown_sources(page)
    assert (first["kind"], first["where"], first["lastStatus"]) == (
        "s3",
        "s3://team-docs/handbook/ · schedule rate(1 day)",
        "",
    )
    assert (second["name"], second["where"]) == ("docs.example.com", "https://docs.example.com/guide/")
    page.screenshot("two-sources")

    # A web source without a seed or sitemap is refused in the page, before any request.
    before = len(sources_api.requests)
    fill(page, {"#source-kind": "web", "#source-seeds": ""})
    page.find("#source-form button[type=submit]").click()
    page.wait(lambda: page.find("#sources-error").is_displayed(), "the form's problem is shown")
    assert page.find("#sources-error").text == "A web source needs a seed URL or a sitemap."
    assert len(sources_api.requests) == before


def test_sync_now_is_followed_until_complete_and_its_failures_are_shown_as_text(
    standin_page: Page, sources_api: SourcesApi
) -> None:
    page = standin_page
    with sources_api.lock:
        source = sources_api.create({"kind": "s3", "name": HOSTILE, "config": {"bucket": "b"}}, "acme")
        sources_api.create({"kind": "s3", "name": "another tenant's", "config": {"bucket": "c"}}, "globex")
    failure = {"item": "x.pdf", "uri": f"s3://b/{HOSTILE}.pdf", "code": "CORRUPT_PDF", "reason": HOSTILE}
    sources_api.plan = [
        Step("IN_PROGRESS", {"scanned": 40, "added": 10}),
        Step("IN_PROGRESS", {"scanned": 90, "added": 60, "failed": 1}, [failure], listing_complete=True),
        Step("COMPLETE", {"scanned": 90, "added": 89, "failed": 1}, [failure]),
    ]
    open_panel(page)
    page.wait(lambda: len(shown_sources(page)) == 1, "only the tenant's own source is listed")
    page.find(".source .sync-now").click()
    page.wait(lambda: shown_sources(page)[0]["lastStatus"] == "COMPLETE", "the sync is followed to COMPLETE", 60)
    [shown] = shown_sources(page)
    assert shown["name"] == HOSTILE
    assert shown["stats"] == {"scanned": 90, "added": 89, "modified": 0, "unchanged": 0, "deleted": 0, "failed": 1}
    assert shown["syncs"][0]["status"] == "COMPLETE"
    assert shown["syncs"][0]["failures"] == [f"s3://b/{HOSTILE}.pdf CORRUPT_PDF {HOSTILE}"]
    assert page.js("return document.querySelectorAll('#source-list img').length") == 0
    assert page.js("return window.__pwned === undefined")
    page.screenshot("sync-complete")

    sync_id = shown["syncs"][0]["id"]
    reads = [r for r in sources_api.calls() if r == f"GET /sources/{source['id']}/syncs/{sync_id}"]
    # The list (GET .../syncs) read the first step, each poll of the sync one more; then polling stopped.
    assert len(reads) == 2
    polls = page.js("return ragIngest.syncLoads")
    # Polling stopped at COMPLETE: reloading the list reads the syncs once more, nothing after.
    page.find("#sources-refresh").click()
    page.wait(lambda: page.js("return ragIngest.syncLoads") == polls + 1, "the list and its open syncs reload")
    assert [r for r in sources_api.calls() if r.endswith(f"/syncs/{sync_id}")] == reads


def test_a_sync_already_running_is_said_and_shown(standin_page: Page, sources_api: SourcesApi) -> None:
    page = standin_page
    with sources_api.lock:
        source = sources_api.create({"kind": "s3", "name": "handbook", "config": {"bucket": "b"}}, "acme")
        # Stays running while the test looks; 900 listed, 5 applied so far.
        sources_api.plan = [Step("IN_PROGRESS", {"scanned": 5}, listed=900)] * 1000
        sources_api.start_sync(source)
    open_panel(page)
    page.wait(lambda: shown_sources(page), "the source is listed")
    page.find(".source .sync-now").click()
    page.wait(lambda: page.find("#sources-error").is_displayed(), "the 409 is explained")
    assert page.find("#sources-error").text == "handbook is already syncing: its progress is shown below."
    page.wait(lambda: shown_sources(page)[0]["syncs"], "the running sync is shown")
    assert shown_sources(page)[0]["syncs"][0]["status"] == "IN_PROGRESS"
    assert "Still listing" in page.find(".syncs .sync").text
    assert "Listed 900 so far" in page.find(".syncs .sync").text
    page.find(".source .show-syncs").click()  # closing stops the polling
    assert page.find(".source .syncs").is_displayed() is False


def test_an_s3_source_over_a_bucket_syncs_from_the_page_on_the_local_stack(
    page: Page, tenant: str, stack_process: OfflineStackProcess
) -> None:
    """Needs the lead's routes and sync engine (docs/sources.md) in the local stack."""
    s3 = boto3.client(
        "s3", endpoint_url=stack_process.moto_endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip
    bucket = f"team-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    for name in ("tides.md", "lighthouses.md", "skip.txt"):
        s3.put_object(Bucket=bucket, Key=f"handbook/{name}", Body=f"# {name}\n\nAbout {name}.\n".encode())
    page.sign_in("ana", tenant)
    open_panel(page)
    fill(
        page,
        {
            "#source-bucket": bucket,
            "#source-prefix": "handbook/",
            "#source-include": "*.md",
            "#source-name": "handbook",
        },
    )
    page.find("#source-form button[type=submit]").click()
    page.wait(lambda: len(shown_sources(page)) == 1, "the source is listed")
    page.find(".source .sync-now").click()
    page.wait(lambda: shown_sources(page)[0]["lastStatus"] in ("COMPLETE", "FAILED"), "the sync ends", 180)
    [shown] = shown_sources(page)
    page.screenshot("stack-sync")
    assert shown["lastStatus"] == "COMPLETE", shown
    assert shown["stats"]["added"] == 2 and shown["stats"]["failed"] == 0, shown
