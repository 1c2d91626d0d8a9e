"""Per-tenant limits through the API handler, against moto's DynamoDB and S3 and the real OpenSearch
(DELETE): a tenant with an override of one document gets 403 QUOTA_EXCEEDED on its second upload
and its count back when the first is deleted; a burst past its rate gets 429 RATE_LIMITED with
Retry-After; another tenant, on the defaults, is never touched by either."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.tenant_usage_table import TenantUsageTable
from rag_ingest.core.limits import Usage
from rag_ingest.embeddings.local import LOCAL_MODEL_ID

from tests.support.aws import FakeLambdaContext, import_handler, moto_server
from tests.support.operations import create_documents_table, create_state_machine, create_tenant_usage_table

pytestmark = pytest.mark.integration
LIMITS = {
    "defaults": {
        "documents": 1000,
        "stored_bytes": 10**9,
        "pages_per_day": 10_000,
        "requests_per_second": 1000,
        "burst_requests": 1000,
        "sources": 50,
        "webhooks": 10,
    },
    "overrides": {"tiny": {"documents": 1}, "bursty": {"requests_per_second": 1, "burst_requests": 4}},
}


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server(), pytest.MonkeyPatch.context() as patch:
        suffix = uuid.uuid4().hex[:8]
        bucket, table, usage = f"docs-{suffix}", f"documents-{suffix}", f"usage-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        create_tenant_usage_table(usage)
        env = {
            "DOCUMENTS_TABLE": table,
            "TENANT_USAGE_TABLE": usage,
            "TENANT_LIMITS": json.dumps(LIMITS),
            "WEBHOOKS_TABLE": "webhooks",
            "SOURCES_TABLE": "sources",
            "SOURCE_SYNC_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:source-sync",
            "SOURCE_SCHEDULE_GROUP": "source-syncs",
            "SOURCE_SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
            "BUCKET_NAME": bucket,
            "MAX_UPLOAD_BYTES": "1048576",
            "UPLOAD_URL_EXPIRY_SECONDS": "900",
            # DELETE asks the real OpenSearch for the document's chunks (an index nobody wrote).
            "OPENSEARCH_ENDPOINT": os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"),
            "OPENSEARCH_INDEX": f"limits-{suffix}",
            "EMBEDDING_DIMENSION": "8",
            "EMBEDDING_PROVIDER": "local",
            "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
            "STATE_MACHINE_ARN": create_state_machine(),
            "POWERTOOLS_SERVICE_NAME": "rag-ingest-api",
        }
        # Set for the import only (its cold start reads them), so no later test inherits the limits.
        for name, value in env.items():
            patch.setenv(name, value)
        api = import_handler("api", {})
        yield {"api": api, "usage": TenantUsageTable(usage)}


def call(api: ModuleType, method: str, path: str, *, tenant: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
            "authorizer": {"jwt": {"claims": {"sub": "user-1", "custom:tenant_id": tenant}, "scopes": None}},
            "requestId": "r",
            "routeKey": f"{method} {path}",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    if body is not None:
        event["body"] = json.dumps(body)
    response = api.handler(event, FakeLambdaContext())
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"] or "null")


def test_a_second_document_over_the_override_is_403_and_a_delete_gives_it_back(world: dict[str, Any]) -> None:
    api, usage = world["api"], world["usage"]
    status, _, first = call(api, "POST", "/documents", tenant="tiny", body={"filename": "a.pdf"})
    assert status == 201, first
    status, headers, refused = call(api, "POST", "/documents", tenant="tiny", body={"filename": "b.pdf"})
    assert status == 403, refused
    assert refused == {
        "error": {
            "code": "QUOTA_EXCEEDED",
            "message": "this tenant holds 1 documents, its limit is 1; delete some first",
        }
    }
    assert "Retry-After" not in headers  # waiting does not help; deleting does
    assert usage.read_usage("tiny") == Usage(documents=1, stored_bytes=0)
    status, _, _ = call(api, "DELETE", f"/documents/{first['document_id']}", tenant="tiny")
    assert status == 200
    assert usage.read_usage("tiny") == Usage(documents=0, stored_bytes=0)
    status, _, _ = call(api, "DELETE", f"/documents/{first['document_id']}", tenant="tiny")
    assert status == 200
    assert usage.read_usage("tiny") == Usage(documents=0, stored_bytes=0)  # a repeated DELETE gives nothing
    assert call(api, "POST", "/documents", tenant="tiny", body={"filename": "c.pdf"})[0] == 201
    # The other tenant, on the defaults, was never limited by tiny's override.
    assert all(
        call(api, "POST", "/documents", tenant="roomy", body={"filename": f"{i}.pdf"})[0] == 201 for i in range(3)
    )


def test_a_burst_past_the_rate_is_429_with_retry_after(world: dict[str, Any]) -> None:
    api = world["api"]
    answers = [call(api, "GET", "/documents", tenant="bursty") for _ in range(8)]
    statuses = [status for status, _, _ in answers]
    # At 1 request a second with a burst of 4 (a token may come back while the 8 calls run).
    assert statuses[:4] == [200] * 4 and statuses.count(429) >= 3, statuses
    _, headers, body = answers[statuses.index(429)]
    assert headers["Retry-After"] == "1"
    assert body["error"]["code"] == "RATE_LIMITED" and "1 requests per second (burst 4)" in body["error"]["message"]
    # Refused before any route ran: the other tenant's requests go on.
    assert all(call(api, "GET", "/documents", tenant="roomy")[0] == 200 for _ in range(10))
