"""GET /documents, POST /documents/{id}/retry and GET /documents/{id}/download through the API
handler, against moto's DynamoDB (the tenant index), Step Functions and S3 (a versioned bucket)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
import requests
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.errors import StaleWriteError
from rag_ingest.core.ids import execution_name, new_document_id
from rag_ingest.core.job import ObjectRef
from rag_ingest.core.record import DocumentStatus, QueueOutcome
from rag_ingest.embeddings.local import LOCAL_MODEL_ID

from tests.support.aws import REPO, FakeLambdaContext, import_handler, moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_state_machine

pytestmark = pytest.mark.integration
SAMPLE = REPO / "samples" / "lighthouses.pdf"


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server():
        suffix = uuid.uuid4().hex[:8]
        bucket, table = f"docs-{suffix}", f"documents-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        state_machine_arn = create_state_machine()
        api = import_handler(
            "api",
            {
                "DOCUMENTS_TABLE": table,
                "WEBHOOKS_TABLE": "webhooks",
                "SOURCES_TABLE": "sources",
                "SOURCE_SYNC_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:source-sync",
                "SOURCE_SCHEDULE_GROUP": "source-syncs",
                "SOURCE_SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
                "BUCKET_NAME": bucket,
                "MAX_UPLOAD_BYTES": "1048576",
                "UPLOAD_URL_EXPIRY_SECONDS": "900",
                "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9",  # no route here searches or deletes
                "OPENSEARCH_INDEX": "unused",
                "EMBEDDING_DIMENSION": "8",
                "EMBEDDING_PROVIDER": "local",
                "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
                "STATE_MACHINE_ARN": state_machine_arn,
                "POWERTOOLS_SERVICE_NAME": "rag-ingest-api",
            },
        )
        yield {"s3": s3, "bucket": bucket, "records": RecordWriter(table), "api": api, "sm": state_machine_arn}


def call(
    world: dict[str, Any], method: str, path: str, *, tenant: str = "acme", body: Any = None, query: str = ""
) -> tuple[int, Any]:
    params = dict(part.split("=", 1) for part in query.split("&") if part)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
            "authorizer": {"jwt": {"claims": {"sub": "u", "custom:tenant_id": tenant}, "scopes": None}},
            "requestId": "r",
            "routeKey": f"{method} {path}",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    if params:
        event["queryStringParameters"] = params
    if body is not None:
        event["body"] = json.dumps(body)
    response = world["api"].handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"])


def put(world: dict[str, Any], status: DocumentStatus, *, tenant: str = "acme", minute: int = 0, **fields: Any) -> str:
    """A record in ``status``, uploaded by the caller of ``call`` (sub "u") unless told otherwise."""
    document_id = new_document_id()
    fields.setdefault("uploaded_by", "u")
    world["records"].put(
        document_id,
        status.value,
        tenant_id=tenant,
        bucket=world["bucket"],
        key=f"raw/{tenant}/{document_id}/a.pdf",
        created_at=f"2026-12-01T05:{minute:02d}:00.000+00:00",
        **fields,
    )
    return document_id


def walk(world: dict[str, Any], tenant: str, limit: int) -> tuple[list[str], int]:
    """Every page of GET /documents; returns the ids in order and the number of pages."""
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        query = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        status, body = call(world, "GET", "/documents", tenant=tenant, query=query)
        assert status == 200, body
        assert len(body["items"]) <= limit
        seen.extend(item["document_id"] for item in body["items"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return seen, pages
        assert pages < 50, "pagination does not end"


def test_list_is_newest_first_paginated_per_tenant_and_hides_deleted(world: dict[str, Any]) -> None:
    tenant = f"list-{uuid.uuid4().hex[:6]}"
    kept = [put(world, DocumentStatus.READY, tenant=tenant, minute=m) for m in range(7)]
    deleted = [put(world, DocumentStatus.DELETED, tenant=tenant, minute=m) for m in range(7, 19)]
    newest = put(world, DocumentStatus.FAILED, tenant=tenant, minute=30)
    others = [put(world, DocumentStatus.READY, tenant=f"{tenant}-x", minute=m) for m in range(3)]

    expected = [newest, *reversed(kept)]
    for limit in (1, 2, 3, 100):
        seen, _ = walk(world, tenant, limit)
        assert seen == expected, f"limit {limit}"
    assert not set(deleted + others) & set(walk(world, tenant, 2)[0])

    status, body = call(world, "GET", "/documents", tenant=tenant, query="limit=1")
    assert status == 200 and body["items"][0]["document_id"] == newest
    assert body["items"][0]["status"] == "FAILED" and "tenant_id" not in body["items"][0]


def test_a_cursor_cannot_be_replayed_by_another_tenant(world: dict[str, Any]) -> None:
    tenant = f"cur-{uuid.uuid4().hex[:6]}"
    for minute in range(3):
        put(world, DocumentStatus.READY, tenant=tenant, minute=minute)
    _, body = call(world, "GET", "/documents", tenant=tenant, query="limit=1")
    status, refused = call(world, "GET", "/documents", tenant="intruder", query=f"cursor={body['next_cursor']}")
    assert status == 400 and refused["error"]["code"] == "INVALID_CURSOR"


def test_a_new_upload_is_listed_at_once(world: dict[str, Any]) -> None:
    tenant = f"new-{uuid.uuid4().hex[:6]}"
    status, ticket = call(world, "POST", "/documents", tenant=tenant, body={"filename": "Q3 ümlaut report.pdf"})
    assert status == 201, ticket
    _, body = call(world, "GET", "/documents", tenant=tenant)
    assert [(d["document_id"], d["status"]) for d in body["items"]] == [(ticket["document_id"], "AWAITING_UPLOAD")]
    assert body["next_cursor"] is None


def test_retry_replays_a_failed_document_once(world: dict[str, Any]) -> None:
    document_id = put(world, DocumentStatus.FAILED, version="v1", error_code="TRANSIENT_RETRIES_EXHAUSTED")
    status, body = call(world, "POST", f"/documents/{document_id}/retry", tenant="globex")
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"

    status, body = call(world, "POST", f"/documents/{document_id}/retry")
    assert status == 202, body
    assert body["document_id"] == document_id and body["status"] == "QUEUED" and body["error_code"] is None
    name = execution_name(document_id, "v1", replay=1)
    execution = boto3.client("stepfunctions").describe_execution(
        executionArn=world["sm"].replace(":stateMachine:", ":execution:") + f":{name}"
    )
    started_with = json.loads(execution["input"])
    assert (started_with["document_id"], started_with["version"], started_with["tenant_id"]) == (
        document_id,
        "v1",
        "acme",
    )

    status, body = call(world, "POST", f"/documents/{document_id}/retry")
    assert status == 409 and body["error"]["code"] == "NOT_RETRYABLE"


@pytest.mark.parametrize("status", [DocumentStatus.READY, DocumentStatus.PROCESSING, DocumentStatus.AWAITING_UPLOAD])
def test_retry_of_anything_but_failed_is_409(world: dict[str, Any], status: DocumentStatus) -> None:
    document_id = put(world, status)
    code, body = call(world, "POST", f"/documents/{document_id}/retry")
    assert code == 409 and body["error"]["code"] == "NOT_RETRYABLE"
    assert world["records"].get(document_id)["status"] == status.value


def test_download_opens_the_current_version_inline(world: dict[str, Any]) -> None:
    document_id = new_document_id()
    key = f"raw/acme/{document_id}/lighthouses.pdf"
    first = world["s3"].put_object(Bucket=world["bucket"], Key=key, Body=SAMPLE.read_bytes())["VersionId"]
    world["s3"].put_object(Bucket=world["bucket"], Key=key, Body=b"%PDF-1.7 a newer version")
    world["records"].put(
        document_id, "READY", bucket=world["bucket"], key=key, version=first, filename="lighthouses.pdf"
    )

    status, link = call(world, "GET", f"/documents/{document_id}/download")
    assert status == 200, link
    assert link["expires_in"] == 300
    response = requests.get(link["url"], timeout=10)
    assert response.status_code == 200
    assert response.content == SAMPLE.read_bytes()  # the version the record names, not the newest
    assert response.headers["Content-Type"] == "application/pdf"
    assert response.headers["Content-Disposition"].startswith('inline; filename="lighthouses.pdf"')

    assert call(world, "GET", f"/documents/{document_id}/download", tenant="globex")[0] == 404


@pytest.mark.parametrize("status", [DocumentStatus.AWAITING_UPLOAD, DocumentStatus.DELETING, DocumentStatus.DELETED])
def test_no_download_before_upload_or_after_delete(world: dict[str, Any], status: DocumentStatus) -> None:
    fields: dict[str, Any] = {"version": None} if status is DocumentStatus.AWAITING_UPLOAD else {}
    document_id = put(world, status, **fields)
    code, body = call(world, "GET", f"/documents/{document_id}/download")
    # Before the upload the document exists (409, a make fuzz finding); after a delete it does not (404).
    expected = (409, "NOT_UPLOADED") if status is DocumentStatus.AWAITING_UPLOAD else (404, "NOT_FOUND")
    assert (code, body["error"]["code"]) == expected


# -- metadata (issue 28): stored on the record in DynamoDB, shown, kept by a new version, filtered --
def test_metadata_round_trips_through_dynamodb_with_its_types(world: dict[str, Any]) -> None:
    metadata = {"customer": "acme", "year": 2024, "score": 0.1, "ratio": 2.0, "signed": False, "tags": ["a", "b"]}
    status, ticket = call(
        world, "POST", "/documents", tenant="meta-rt", body={"filename": "c.pdf", "metadata": metadata}
    )
    assert status == 201, ticket
    stored = world["records"].get(ticket["document_id"])["metadata"]
    assert stored["score"] == Decimal("0.1") and stored["year"] == 2024  # exact decimals, not binary floats
    status, document = call(world, "GET", f"/documents/{ticket['document_id']}", tenant="meta-rt")
    assert status == 200 and document["metadata"] == metadata
    assert type(document["metadata"]["year"]) is int and type(document["metadata"]["ratio"]) is float
    status, page = call(world, "GET", "/documents", tenant="meta-rt")
    assert page["items"][0]["metadata"] == metadata


def test_a_new_version_keeps_the_records_metadata(world: dict[str, Any]) -> None:
    status, ticket = call(
        world, "POST", "/documents", tenant="meta-v", body={"filename": "c.pdf", "metadata": {"k": 1}}
    )
    assert status == 201
    documents = DocumentsTable(world["records"].table_name)
    document_id = ticket["document_id"]
    key = f"raw/meta-v/{document_id}/c.pdf"
    for n, version in enumerate(("v1", "v2")):
        result = documents.mark_queued(
            document_id=document_id,
            tenant_id="meta-v",
            ref=ObjectRef(bucket=world["bucket"], key=key, version=version),
            event_time=f"2026-12-01T05:0{n}:00Z",
            size_bytes=10,
        )
        assert result.outcome is QueueOutcome.QUEUED
        assert result.record is not None and result.record.metadata == {"k": 1}
    record = documents.get(document_id)
    assert record is not None and record.version == "v2" and record.metadata == {"k": 1}


def test_the_listing_filters_on_metadata(world: dict[str, Any]) -> None:
    tenant = "meta-list"
    wanted = []
    for n in range(7):
        body = {"filename": f"d{n}.pdf", "metadata": {"customer": "acme" if n % 2 else "globex", "n": n}}
        status, ticket = call(world, "POST", "/documents", tenant=tenant, body=body)
        assert status == 201
        if n % 2:
            wanted.append(ticket["document_id"])
    where = '{"equals":{"key":"customer","value":"acme"}}'
    seen, cursor = [], None
    for _ in range(10):
        status, page = call(
            world,
            "GET",
            "/documents",
            tenant=tenant,
            query=f"limit=2&filter={where}" + (f"&cursor={cursor}" if cursor else ""),
        )
        assert status == 200, page
        seen += [item["document_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(wanted)
    status, page = call(world, "GET", "/documents", tenant=tenant, query='filter={"equals":{"key":"page","value":1}}')
    assert status == 400 and page["error"]["message"].startswith("filter.equals.key: ")


def test_patch_is_a_compare_and_set_on_the_records_revision(world: dict[str, Any]) -> None:
    """PATCH on DynamoDB (moto): revision 1 → 2 → 3 with floats kept exact; a stale revision loses;
    a record written before revisions existed reads as 1; another tenant's is 404. (An AWAITING_UPLOAD
    document changes on its record only: no chunks to rewrite, so no OpenSearch here.)"""
    status, ticket = call(world, "POST", "/documents", tenant="patch", body={"filename": "p.pdf"})
    assert status == 201
    document_id = ticket["document_id"]
    documents = DocumentsTable(world["records"].table_name)
    record = documents.get(document_id)
    assert record is not None and record.revision == 1
    assert "revision" not in world["records"].get(document_id)  # old and new records alike read as 1

    updated = documents.update_fields(record, {"metadata": {"score": 0.1, "tags": ["a"], "n": 3}})
    assert updated.revision == 2 and updated.metadata == {"score": 0.1, "tags": ["a"], "n": 3}
    assert world["records"].get(document_id)["metadata"]["score"] == Decimal("0.1")
    with pytest.raises(StaleWriteError):
        documents.update_fields(record, {"metadata": {}})  # read at revision 1
    status, view = call(world, "PATCH", f"/documents/{document_id}", tenant="patch", body={"metadata": {"k": "v"}})
    assert status == 200 and (view["revision"], view["metadata"]) == (3, {"k": "v"})
    status, _ = call(world, "PATCH", f"/documents/{document_id}", tenant="other", body={"metadata": {"k": "x"}})
    assert status == 404
    assert documents.get(document_id).metadata == {"k": "v"}  # type: ignore[union-attr]


def test_access_and_uploader_round_trip_through_dynamodb_and_a_new_version_keeps_them(world: dict[str, Any]) -> None:
    access = {"users": ["u-listed"], "groups": ["legal"]}
    status, ticket = call(world, "POST", "/documents", tenant="acl-v", body={"filename": "c.pdf", "access": access})
    assert status == 201, ticket
    document_id = ticket["document_id"]
    stored = world["records"].get(document_id)
    nobody = {"users": [], "groups": []}
    assert stored["access"] == {**access, "editors": nobody, "deny": nobody} and stored["uploaded_by"] == "u"
    documents = DocumentsTable(world["records"].table_name)
    for n, version in enumerate(("v1", "v2")):
        documents.mark_queued(
            document_id=document_id,
            tenant_id="acl-v",
            ref=ObjectRef(bucket=world["bucket"], key=f"raw/acl-v/{document_id}/c.pdf", version=version),
            event_time=f"2026-12-01T05:0{n}:00Z",
            size_bytes=10,
        )
    record = documents.get(document_id)
    assert record is not None and record.version == "v2"
    assert record.access.model_dump() == {**access, "editors": nobody, "deny": nobody} and record.uploaded_by == "u"
    # The uploader reads it: GET shows the access and the uploader.
    status, document = call(world, "GET", f"/documents/{document_id}", tenant="acl-v")
    assert (
        status == 200
        and document["access"] == {**access, "editors": nobody, "deny": nobody}
        and document["uploaded_by"] == "u"
    )
    # An open upload stores no access attribute and reads as open.
    status, ticket = call(world, "POST", "/documents", tenant="acl-v", body={"filename": "d.pdf"})
    assert "access" not in world["records"].get(ticket["document_id"])
    status, document = call(world, "GET", f"/documents/{ticket['document_id']}", tenant="acl-v")
    assert document["access"] == {**nobody, "editors": nobody, "deny": nobody}


def test_content_before_upload_is_409_not_404(world: dict[str, Any]) -> None:
    # A make fuzz finding (docs/fuzzing.md): the document exists, its text does not yet.
    document_id = put(world, DocumentStatus.AWAITING_UPLOAD, version=None)
    code, body = call(world, "GET", f"/documents/{document_id}/content")
    assert code == 409 and body["error"]["code"] == "NO_RENDERED_VIEW", body
    assert call(world, "GET", f"/documents/{document_id}/content", tenant="globex")[0] == 404
