"""The page's live channel against the local stack's WebSocket API: the production client, its
``$connect`` authorizer and pusher. Pushed documents reach only the pages that may read them: not
another tenant's, and a restricted document not a reader of the tenant it does not name."""

from __future__ import annotations

import time

import jwt
import pytest

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.browser.page import Page, new_driver

pytestmark = pytest.mark.browser


def _subject(client: OfflineClient) -> str:
    return str(jwt.decode(client.token(), options={"verify_signature": False})["sub"])


def _row_sources(page: Page) -> dict[str, str]:
    return dict(
        page.js(
            "return Object.fromEntries([...document.querySelectorAll('#document-rows tr')]"
            ".map(r => [r.dataset.documentId, r.dataset.source]))"
        )
    )


def _wait_live(page: Page, username: str) -> None:
    page.wait(lambda: page.stats()["live"]["state"] == "live", f"{username}'s live channel is connected")


def _create(client: OfflineClient, filename: str, access: dict[str, list[str]] | None = None) -> str:
    """A document record through the API (AWAITING_UPLOAD): its insert is pushed like any change."""
    body: dict[str, object] = {"filename": filename}
    if access is not None:
        body["access"] = access
    answer = client.request("POST", "/documents", body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["document_id"])


def test_pushed_documents_reach_only_the_pages_that_may_read_them(
    page: Page, tenant: str, stack_process: OfflineStackProcess
) -> None:
    api_url = stack_process.api_url
    uploader = OfflineClient(api_url, tenant_id=tenant, username="hana")
    listed = OfflineClient(api_url, tenant_id=tenant, username="juno")
    other_tenant = f"{tenant}-x"
    drivers = [new_driver(), new_driver()]
    try:
        # One page per reader: a user of the tenant not named, the named one, and another tenant's
        # user of the same name.
        unnamed, named = page, Page(drivers[0], api_url, "live-named")
        stranger = Page(drivers[1], api_url, "live-stranger")
        for opened, username, tenant_id in (
            (unnamed, "ivan", tenant),
            (named, "juno", tenant),
            (stranger, "juno", other_tenant),
        ):
            if opened is not page:
                opened.open()
            opened.sign_in(username, tenant_id)
            _wait_live(opened, username)

        restricted = _create(uploader, "restricted.pdf", {"users": [_subject(listed)], "groups": []})
        open_to_all = _create(uploader, "open.pdf")
        marker = _create(OfflineClient(api_url, tenant_id=other_tenant, username="lee"), "marker.pdf")

        # Each page gets what it may read, pushed; the stream is in order, so the later pushes
        # arriving means the earlier ones were decided.
        named.wait(lambda: {restricted, open_to_all} <= set(named.rows()), "the named reader's page shows both")
        unnamed.wait(lambda: open_to_all in unnamed.rows(), "the unnamed reader's page shows the open one")
        stranger.wait(lambda: marker in stranger.rows(), "the other tenant's page shows its own")
        time.sleep(1)
        assert _row_sources(named) == {restricted: "live", open_to_all: "live"}
        assert _row_sources(unnamed) == {open_to_all: "live"}, "a restricted document reached a non-reader"
        assert _row_sources(stranger) == {marker: "live"}, "another tenant's documents reached this page"
        assert [p.stats()["live"]["messages"] for p in (named, unnamed, stranger)] == [2, 1, 1]
        assert all(p.stats()["live"]["errors"] == 0 and p.not_reloaded() for p in (named, unnamed, stranger))
        named.screenshot("named-reader")
        unnamed.screenshot("unnamed-reader")
    finally:
        for driver in drivers:
            driver.quit()


def test_the_local_config_names_the_websocket_api(page: Page, stack_process: OfflineStackProcess) -> None:
    config = page.js_async("fetch('config.json').then(r => r.json()).then(arguments[0])")
    assert config["live"] == {
        "kind": "websocket",
        "url": stack_process.api_url.replace("http://", "ws://") + "/_local/live",
    }
