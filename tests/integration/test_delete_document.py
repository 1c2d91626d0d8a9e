"""DELETE /documents/{id} through the API handler, against moto's S3 and DynamoDB and the real
OpenSearch (an index of its own): tenant check, every trace removed, idempotent, resumable."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import ObjectRef
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp, QueueOutcome
from rag_ingest.embeddings.local import LOCAL_MODEL_ID
from rag_ingest.wiring import vector_store_for

from tests.support.aws import FakeLambdaContext, import_handler, moto_server
from tests.support.operations import RecordWriter, create_documents_table

pytestmark = pytest.mark.integration
OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
DIMENSION = 8


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server():
        suffix = uuid.uuid4().hex[:8]
        bucket, table, index = f"docs-{suffix}", f"documents-{suffix}", f"test-delete-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        store = vector_store_for(OPENSEARCH_URL, index, DIMENSION)
        store.ensure_index()
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
                "OPENSEARCH_ENDPOINT": OPENSEARCH_URL,
                "OPENSEARCH_INDEX": index,
                "EMBEDDING_DIMENSION": str(DIMENSION),
                "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:unused",
                # POST /search's query embedder (made on first use: DELETE never loads it).
                "EMBEDDING_PROVIDER": "local",
                "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
                "POWERTOOLS_SERVICE_NAME": "rag-ingest-api",
            },
        )
        try:
            yield {"s3": s3, "bucket": bucket, "table": table, "store": store, "api": api}
        finally:
            store._client.indices.delete(index=index, ignore_unavailable=True)


def http(api: ModuleType, method: str, path: str, tenant: str) -> tuple[int, dict[str, Any]]:
    """An HTTP API (payload 2.0) event with the Cognito JWT claims of a tenant admin (who may delete any
    of the tenant's documents: docs/api.md, "Per-document access"), through the real handler."""
    event = {
        "version": "2.0",
        "routeKey": f"{method} /documents/{{document_id}}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "authorizer": {
                "jwt": {"claims": {"custom:tenant_id": tenant, "cognito:groups": "[tenant-admins]"}, "scopes": None}
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": f"{method} /documents/{{document_id}}",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    response = api.handler(event, FakeLambdaContext())
    return int(response["statusCode"]), json.loads(response["body"] or "{}")


def versions(world: dict[str, Any], prefix: str) -> int:
    page = world["s3"].list_object_versions(Bucket=world["bucket"], Prefix=prefix)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def ingested(world: dict[str, Any], tenant: str = "acme") -> str:
    """A READY document as the pipeline leaves it: two uploaded versions, artifacts, chunks."""
    document_id = new_document_id()
    key = f"raw/{tenant}/{document_id}/report.pdf"
    s3, bucket = world["s3"], world["bucket"]
    s3.put_object(Bucket=bucket, Key=key, Body=b"%PDF-1.7 first")
    version = s3.put_object(Bucket=bucket, Key=key, Body=b"%PDF-1.7 second")["VersionId"]
    for name in ("pages.json", "chunks.json", "embeddings/000000.json"):
        s3.put_object(Bucket=bucket, Key=f"artifacts/{document_id}/abc/{name}", Body=b"{}")
    s3.put_object(Bucket=bucket, Key=f"artifacts/{document_id}/abc/pages.json", Body=b"{}")  # a retry's rewrite
    chunks = [
        Chunk(chunk_index=i, text=f"passage {i}", page_start=1, page_end=1, char_start=0, char_end=9, token_count=2)
        for i in range(3)
    ]
    store: VectorStore = world["store"]
    store.write_chunks(
        DocumentStamp(tenant, document_id, version, filename="report.pdf"),
        chunks,
        [[0.1 * (i + 1)] * DIMENSION for i in range(3)],
    )
    RecordWriter(world["table"]).put(
        document_id, "READY", tenant_id=tenant, bucket=bucket, key=key, version=version, chunk_count=3
    )
    return document_id


def test_delete_removes_chunks_artifacts_and_every_upload_version(world: dict[str, Any]) -> None:
    api, store = world["api"], world["store"]
    document_id, neighbour = ingested(world), ingested(world)
    path = f"/documents/{document_id}"

    # Another tenant: exactly like a missing document, and nothing is touched.
    status, body = http(api, "DELETE", path, tenant="intruder")
    assert status == 404
    assert RecordWriter(world["table"]).get(document_id)["status"] == "READY"

    status, body = http(api, "DELETE", path, tenant="acme")
    assert status == 200, body
    assert body == {
        "document_id": document_id,
        "status": "DELETED",
        "chunks_deleted": 3,
        "artifact_versions_deleted": 4,
        "upload_versions_deleted": 2,
    }
    assert store.count(document_id=document_id) == 0
    assert versions(world, f"artifacts/{document_id}/") == 0
    assert versions(world, f"raw/acme/{document_id}/") == 0
    record = RecordWriter(world["table"]).get(document_id)
    assert record["status"] == "DELETED" and "deleted_at" in record
    # The neighbour keeps everything.
    assert store.count(document_id=neighbour) == 3
    assert versions(world, f"artifacts/{neighbour}/") == 4 and versions(world, f"raw/acme/{neighbour}/") == 2

    # Idempotent: the same request again answers the same, and deletes nothing more.
    status, again = http(api, "DELETE", path, tenant="acme")
    assert (status, again["status"], again["chunks_deleted"]) == (200, "DELETED", 0)
    status, view = http(api, "GET", path, tenant="acme")
    assert (status, view["status"]) == (200, "DELETED")
    assert http(api, "DELETE", f"/documents/{new_document_id()}", tenant="acme")[0] == 404

    # A late S3 event for the deleted document is refused by intake, not resurrected.
    late = DocumentsTable(world["table"]).mark_queued(
        document_id=document_id,
        tenant_id="acme",
        ref=ObjectRef(bucket=world["bucket"], key=f"raw/acme/{document_id}/report.pdf", version="v9"),
        event_time=datetime.now(UTC).isoformat(),
        size_bytes=1,
    )
    assert late.outcome is QueueOutcome.REJECTED


def test_an_interrupted_delete_is_finished_by_the_next_request(world: dict[str, Any]) -> None:
    api, store = world["api"], world["store"]
    document_id = ingested(world)
    table = boto3.resource("dynamodb").Table(world["table"])
    # As if the function died after marking DELETING: the record says so, everything is still there.
    table.update_item(
        Key={"document_id": document_id},
        UpdateExpression="SET #s = :deleting",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":deleting": "DELETING"},
    )
    status, body = http(api, "DELETE", f"/documents/{document_id}", tenant="acme")
    assert (status, body["status"], body["chunks_deleted"]) == (200, "DELETED", 3)
    assert store.count(document_id=document_id) == 0
    assert versions(world, f"raw/acme/{document_id}/") == 0
