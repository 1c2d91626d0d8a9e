"""What the local stack cannot make happen, against the stand-ins of tests/browser/oauth_standin.py:
the live channel is down (the page polls documents to their end), and S3 refuses an upload by its
POST policy (moto accepts every presigned POST; the page must show S3's own reason)."""

from __future__ import annotations

import datetime

import pytest

from tests.browser.conftest import sign_in_with_cognito
from tests.browser.oauth_standin import CognitoStandIn
from tests.browser.page import SAMPLES, Page

pytestmark = pytest.mark.browser


def _document(status: str, updated: datetime.datetime, **fields: object) -> dict[str, object]:
    created = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
    return {
        "document_id": "01POLLED",
        "status": status,
        "filename": "polled.pdf",
        "stage": None,
        "progress": None,
        "attempts": {},
        "error_code": None,
        "error_detail": None,
        "page_count": None,
        "failed_pages": [],
        "chunk_count": None,
        "timings_ms": {},
        "created_at": created.isoformat(),
        "updated_at": updated.isoformat(),
        **fields,
    }


def test_while_the_live_channel_is_down_the_page_polls_documents_until_they_finish(
    cognito_page: Page, cognito: CognitoStandIn
) -> None:
    page = cognito_page
    started = datetime.datetime(2026, 1, 1, 12, 0, 5, tzinfo=datetime.UTC)
    cognito.documents["01POLLED"] = _document(
        "PROCESSING", started, stage="EMBED", progress={"done": 2, "total": 5}, page_count=3, chunk_count=5
    )
    sign_in_with_cognito(page)
    row = page.wait(lambda: page.rows().get("01POLLED"), "the processing document is listed")
    assert (row["status"], row["stage"]) == ("PROCESSING", "embed")
    page.wait(lambda: page.stats()["live"]["errors"] >= 1, "the WebSocket fails", 20)

    cognito.documents["01POLLED"] = _document(
        "READY",
        started + datetime.timedelta(seconds=9),
        stage="FINALIZE",
        progress={"done": 5, "total": 5},
        page_count=3,
        chunk_count=5,
        timings_ms={"VALIDATE": 100, "PARSE": 400, "CHUNK": 200, "EMBED": 5000, "INDEX": 300, "FINALIZE": 100},
    )
    page.wait(lambda: page.rows()["01POLLED"]["status"] == "READY", "the poll brings READY", 30)
    source = page.js("return document.querySelector('tr[data-document-id=\"01POLLED\"]').dataset.source")
    assert source == "poll" and cognito.document_gets >= 1
    assert page.rows()["01POLLED"]["duration"] == "6.1 s"  # the sum of the stage timings
    gets = cognito.document_gets
    page.screenshot("polled-ready")
    # A finished document is not polled any more.
    page.wait(lambda: page.stats()["polls"] >= 2, "another polling round", 20)
    assert cognito.document_gets == gets


@pytest.mark.parametrize(
    ("refusal", "shown"),
    [
        (
            (403, "AccessDenied", 'Invalid according to Policy: Policy Condition failed: ["eq", "$Content-Type", "x"]'),
            "Storage refused the upload (403 AccessDenied): Invalid according to Policy: Policy Condition failed",
        ),
        (
            (400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size"),
            "Storage refused the upload (400 EntityTooLarge): Your proposed upload exceeds the maximum allowed size",
        ),
    ],
)
def test_a_refusal_by_storage_is_shown_with_its_reason(
    cognito_page: Page, cognito: CognitoStandIn, refusal: tuple[int, str, str], shown: str
) -> None:
    page = cognito_page
    cognito.storage_refusal = refusal
    sign_in_with_cognito(page)
    page.choose_files(SAMPLES / "sourdough.pdf")
    [item] = page.wait(lambda: page.uploads_in(1, "failed"), "the upload fails", 20)
    assert item["status"].startswith(shown), item
    assert page.stats()["uploads"]["failed"] == 1
    page.screenshot(f"storage-refused-{refusal[1]}")


def test_over_a_websocket_the_page_applies_pushed_updates_and_reconnects_after_a_drop(
    cognito_page: Page, cognito: CognitoStandIn
) -> None:
    """The AWS transport: the page connects with its ID token, applies ``document.updated`` messages
    (a new document appears, then goes READY), ignores anything else, and reconnects when dropped."""
    page = cognito_page
    cognito.live_enabled = True
    sign_in_with_cognito(page)
    page.wait(lambda: page.stats()["live"]["state"] == "live", "the WebSocket is connected")
    assert cognito.live_tokens == [cognito.issued_tokens[-1]]  # the ID token, in the query string

    started = datetime.datetime(2026, 1, 1, 12, 0, 5, tzinfo=datetime.UTC)
    cognito.push({"type": "something.else", "document": {"document_id": "01IGNORED"}})
    cognito.push(
        {"type": "document.updated", "document": _document("PROCESSING", started, stage="PARSE", page_count=3)}
    )
    row = page.wait(lambda: page.rows().get("01POLLED"), "the pushed document appears")
    assert (row["status"], row["stage"]) == ("PROCESSING", "parse")
    # An older state arriving late does not overwrite a newer one.
    cognito.push({"type": "document.updated", "document": _document("QUEUED", started - datetime.timedelta(seconds=3))})
    done = _document("READY", started + datetime.timedelta(seconds=4), page_count=3, chunk_count=7)
    cognito.push({"type": "document.updated", "document": done})
    page.wait(lambda: page.rows()["01POLLED"]["status"] == "READY", "the pushed READY is shown")
    assert page.rows()["01POLLED"]["chunks"] == "7" and "01IGNORED" not in page.rows()
    assert page.stats()["live"]["messages"] == 3  # the message of another type is not counted
    page.screenshot("websocket-ready")

    cognito.drop_connection()
    page.wait(lambda: page.stats()["live"]["errors"] == 1, "the page sees the drop", 10)
    page.wait(lambda: page.stats()["live"]["connects"] == 2, "the page reconnects", 20)
    assert page.stats()["live"]["state"] == "live" and page.not_reloaded()
    # Under a CSP as strict as CloudFront's, nothing was refused and nothing failed.
    assert page.console_errors() == []
