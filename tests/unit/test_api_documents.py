"""The API's document operations: the list cursor, listing, retry decisions and the download link.

The table is replaced by small in-memory fakes (the DynamoDB side is tests/integration/test_api_documents_moto.py);
presigning is boto3's own local computation with fake credentials.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from rag_ingest.adapters.presigner import S3Presigner
from rag_ingest.core.config import ApiEnv
from rag_ingest.core.errors import ErrorCode, PermanentError, StaleWriteError
from rag_ingest.core.ids import document_id_for_object, is_document_id, new_document_id
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.documents.errors import (
    DocumentNotFoundError,
    InvalidCursorError,
    NotRetryableError,
    NotUploadedError,
)
from rag_ingest.documents.paging import decode_cursor, encode_cursor
from rag_ingest.documents.service import DOWNLOAD_URL_SECONDS, MAX_RETRIES, DocumentService

pytestmark = pytest.mark.unit
ENV = ApiEnv.from_env(
    {
        "DOCUMENTS_TABLE": "documents",
        "BUCKET_NAME": "rag-docs",
        "MAX_UPLOAD_BYTES": "1048576",
        "UPLOAD_URL_EXPIRY_SECONDS": "300",
        "OPENSEARCH_ENDPOINT": "https://search.example",
        "OPENSEARCH_INDEX": "rag-chunks",
        "EMBEDDING_DIMENSION": "1024",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ingest",
    }
)
NOW = "2026-12-01T05:00:00.000+00:00"


def record(document_id: str, tenant: str = "acme", status: DocumentStatus = DocumentStatus.READY, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "document_id": document_id,
        "tenant_id": tenant,
        "status": status,
        "filename": "report.pdf",
        "bucket": "rag-docs",
        "key": f"raw/{tenant}/{document_id}/report.pdf",
        "version": "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY",
        "created_at": NOW,
        "updated_at": NOW,
        **fields,
    }
    return DocumentRecord.model_validate(values)


class FakeTable:
    """The reads and the replay DocumentService makes, over a dict of records."""

    def __init__(self, *records: DocumentRecord) -> None:
        self.records = {r.document_id: r for r in records}
        self.replayed: list[str] = []
        self.stale = False
        self.list_calls: list[dict[str, Any]] = []

    def get(self, document_id: str) -> Any:
        return self.records.get(document_id)

    def replay(self, rec: DocumentRecord) -> object:
        if self.stale:
            raise StaleWriteError("changed")
        self.replayed.append(rec.document_id)
        self.records[rec.document_id] = rec.model_copy(update={"status": DocumentStatus.QUEUED, "replays": 1})
        return rec

    def list_by_tenant(
        self, tenant_id: str, *, limit: int, start_key: Mapping[str, str] | None
    ) -> tuple[list[DocumentRecord], dict[str, str] | None]:
        self.list_calls.append({"tenant_id": tenant_id, "limit": limit, "start_key": start_key})
        mine = sorted((r for r in self.records.values() if r.tenant_id == tenant_id), key=lambda r: r.created_at)
        page = list(reversed(mine))[:limit]
        last = page[-1] if len(mine) > limit else None
        key = {"document_id": last.document_id, "tenant_id": tenant_id, "created_at": last.created_at} if last else None
        return list(page), key


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials in a region of their own: presigning is local computation, nothing is contacted."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def service_over(table: FakeTable) -> DocumentService:
    # The API function's own presigning client: SigV4, regional virtual-hosted URLs.
    return DocumentService(ENV, table, S3Presigner(), replayer=table)  # type: ignore[arg-type]


# -- ids and the cursor --------------------------------------------------------------------------
def test_only_issued_document_ids_are_accepted() -> None:
    assert is_document_id(new_document_id())
    assert is_document_id(document_id_for_object("bucket", "raw/acme/file.pdf"))
    for odd in ("", "..", "%2F", "a/b", new_document_id() + "\n", new_document_id().lower(), "A" * 2048, "ü" * 26):
        assert not is_document_id(odd), odd


def test_cursor_round_trips_and_is_url_safe() -> None:
    key = {"document_id": new_document_id(), "tenant_id": "acme", "created_at": NOW}
    cursor = encode_cursor(key)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_cursor(cursor, "acme") == key


def _raw_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "e30",  # {}
        _raw_cursor([1, 2]),
        _raw_cursor({"document_id": "x", "tenant_id": "acme", "created_at": NOW}),
        _raw_cursor({"document_id": new_document_id(), "tenant_id": "acme", "created_at": "yesterday"}),
        _raw_cursor({"document_id": new_document_id(), "tenant_id": "acme", "created_at": 5}),
        _raw_cursor({"document_id": new_document_id(), "tenant_id": "acme", "created_at": NOW, "extra": "1"}),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        _raw_cursor({"a": [[[[[[]]]]]]}),
        "A" * 5000,
    ],
)
def test_garbage_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursorError):
        decode_cursor(cursor, "acme")


def test_a_cursor_never_reaches_another_tenant() -> None:
    theirs = encode_cursor({"document_id": new_document_id(), "tenant_id": "globex", "created_at": NOW})
    with pytest.raises(InvalidCursorError, match="another listing"):
        decode_cursor(theirs, "acme")
    table = FakeTable()
    with pytest.raises(InvalidCursorError):
        service_over(table).list("acme", cursor=theirs)
    assert table.list_calls == []  # refused before any query


# -- listing -------------------------------------------------------------------------------------
def test_list_pages_newest_first_with_a_cursor() -> None:
    ids = [new_document_id() for _ in range(3)]
    table = FakeTable(
        *(record(i, created_at=f"2026-12-01T05:00:0{n}.000+00:00") for n, i in enumerate(ids)),
        record(new_document_id(), tenant="globex"),
    )
    service = service_over(table)
    first = service.list("acme", limit=2)
    assert [d.document_id for d in first.items] == [ids[2], ids[1]]
    assert first.next_cursor is not None
    assert decode_cursor(first.next_cursor, "acme")["document_id"] == ids[1]
    service.list("acme", limit=2, cursor=first.next_cursor)
    assert table.list_calls[-1]["start_key"] == decode_cursor(first.next_cursor, "acme")
    assert service.list("acme", limit=5).next_cursor is None


@pytest.mark.parametrize("limit", [0, 101, -1])
def test_list_limit_is_bounded(limit: int) -> None:
    with pytest.raises(PermanentError) as raised:
        service_over(FakeTable()).list("acme", limit=limit)
    assert raised.value.code is ErrorCode.INVALID_REQUEST


# -- retry ---------------------------------------------------------------------------------------
def test_retry_replays_a_failed_document() -> None:
    document_id = new_document_id()
    table = FakeTable(
        record(document_id, status=DocumentStatus.FAILED, error_code=ErrorCode.TRANSIENT_RETRIES_EXHAUSTED)
    )
    view = service_over(table).retry("acme", document_id)
    assert table.replayed == [document_id]
    assert view.status == "QUEUED"


@pytest.mark.parametrize(
    "status", [s for s in DocumentStatus if s not in (DocumentStatus.FAILED, DocumentStatus.DELETED)]
)
def test_only_failed_documents_are_retryable(status: DocumentStatus) -> None:
    document_id = new_document_id()
    table = FakeTable(record(document_id, status=status))
    with pytest.raises(NotRetryableError, match=status.value):
        service_over(table).retry("acme", document_id)
    assert table.replayed == []


def test_retry_of_another_tenants_or_a_deleted_or_odd_document_is_not_found() -> None:
    theirs, deleted = new_document_id(), new_document_id()
    table = FakeTable(
        record(theirs, tenant="globex", status=DocumentStatus.FAILED),
        record(deleted, status=DocumentStatus.DELETED),
    )
    service = service_over(table)
    for document_id in (theirs, deleted, new_document_id(), "../etc", "x" * 2048):
        with pytest.raises(DocumentNotFoundError):
            service.retry("acme", document_id)
    assert table.replayed == []


def test_retry_refuses_a_failure_without_an_upload_a_lost_race_and_endless_retries() -> None:
    never_uploaded, raced, worn = new_document_id(), new_document_id(), new_document_id()
    table = FakeTable(
        record(never_uploaded, status=DocumentStatus.FAILED, version=None),
        record(raced, status=DocumentStatus.FAILED),
        record(worn, status=DocumentStatus.FAILED, replays=MAX_RETRIES),
    )
    service = service_over(table)
    with pytest.raises(NotRetryableError, match="never arrived"):
        service.retry("acme", never_uploaded)
    with pytest.raises(NotRetryableError, match="retried"):
        service.retry("acme", worn)
    table.stale = True
    with pytest.raises(NotRetryableError, match="changed"):
        service.retry("acme", raced)


# -- download ------------------------------------------------------------------------------------
def test_download_is_a_short_inline_pdf_link_to_the_current_version() -> None:
    document_id = new_document_id()
    table = FakeTable(
        record(document_id, filename="Annual report.pdf", key=f"raw/acme/{document_id}/Annual report.pdf")
    )
    link = service_over(table).download("acme", document_id)
    url = urlsplit(link.url)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert link.expires_in == DOWNLOAD_URL_SECONDS
    assert url.path.endswith(f"/raw/acme/{document_id}/Annual%20report.pdf")
    assert query["versionId"] == "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"
    assert query["response-content-type"] == "application/pdf"
    assert query["response-content-disposition"].startswith('inline; filename="Annual report.pdf"')
    assert query["X-Amz-Expires"] == str(DOWNLOAD_URL_SECONDS)
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"  # S3 refuses SigV2 on buckets made since 2020
    assert url.netloc == "rag-docs.s3.eu-west-1.amazonaws.com"


def test_download_of_an_unversioned_object_names_no_version_and_quotes_odd_names() -> None:
    document_id = document_id_for_object("rag-docs", 'raw/acme/na"me ü.pdf')
    table = FakeTable(record(document_id, filename='na"me ü.pdf', version="etag:abc"))
    query = parse_qs(urlsplit(service_over(table).download("acme", document_id).url).query)
    assert "versionId" not in query
    disposition = query["response-content-disposition"][0]
    assert disposition.startswith('inline; filename="na_me _.pdf"')
    assert disposition.endswith("filename*=UTF-8''na%22me%20%C3%BC.pdf")


@pytest.mark.parametrize(
    ("status", "fields"),
    [
        (DocumentStatus.AWAITING_UPLOAD, {"version": None}),
        (DocumentStatus.DELETING, {}),
        (DocumentStatus.DELETED, {}),
    ],
)
def test_no_download_before_the_upload_or_after_a_delete(status: DocumentStatus, fields: dict[str, Any]) -> None:
    document_id = new_document_id()
    # Before the upload: 409 NOT_UPLOADED (the document exists); after a delete: 404.
    refusal = NotUploadedError if status is DocumentStatus.AWAITING_UPLOAD else DocumentNotFoundError
    with pytest.raises(refusal):
        service_over(FakeTable(record(document_id, status=status, **fields))).download("acme", document_id)


def test_another_tenants_document_is_not_found_anywhere() -> None:
    document_id = new_document_id()
    service = service_over(FakeTable(record(document_id, tenant="globex")))
    with pytest.raises(DocumentNotFoundError):
        service.get("acme", document_id)
    with pytest.raises(DocumentNotFoundError):
        service.download("acme", document_id)
