"""Per-tenant limits on the real local stack (docs/api.md, "Limits per tenant"). The session stack
gives the tenant ``e2e-limits`` an override (tests/conftest.py: one document, one request a second,
a burst of 5): its first upload is accepted and finishes READY, intake counts its bytes and Parse its
pages in the usage table; its second upload is 403 QUOTA_EXCEEDED; a burst of requests gets 429
RATE_LIMITED with Retry-After; deleting the document gives its count and bytes back."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from local.client import OfflineClient
from tests.conftest import LIMITED_TENANT

pytestmark = pytest.mark.e2e
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "lighthouses.pdf"


def _item(aws: dict[str, Any], table: str, key: dict[str, str]) -> dict[str, Any]:
    found = aws["dynamodb"].get_item(TableName=table, Key={name: {"S": value} for name, value in key.items()})
    return dict(found.get("Item") or {})


def _wait_for_rate() -> None:
    """Let the tenant's bucket fill again (one token a second, five at most)."""
    time.sleep(5.5)


def test_a_tenant_over_its_limits_is_refused_and_nothing_accepted_is_dropped(
    local_stack: dict[str, Any], aws_clients: dict[str, Any]
) -> None:
    client = OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=LIMITED_TENANT)
    usage_table, documents_table = local_stack["TenantUsageTableName"], local_stack["DocumentsTableName"]
    document_id = client.upload(SAMPLE)

    # The accepted upload finishes (watched in the table: the API would spend the tenant's one request a second).
    deadline = time.monotonic() + 300
    while _item(aws_clients, documents_table, {"document_id": document_id}).get("status", {}).get("S") != "READY":
        assert time.monotonic() < deadline, "the accepted document never became READY"
        time.sleep(1)
    record = _item(aws_clients, documents_table, {"document_id": document_id})
    usage = _item(aws_clients, usage_table, {"tenant_id": LIMITED_TENANT, "item": "usage"})
    assert usage["documents"] == {"N": "1"}
    assert usage["stored_bytes"] == {"N": str(SAMPLE.stat().st_size)} == {"N": record["size_bytes"]["N"]}
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    pages = _item(aws_clients, usage_table, {"tenant_id": LIMITED_TENANT, "item": f"pages#{today}"})
    assert pages["pages"] == record["page_count"]

    _wait_for_rate()
    refused = client.create_upload("second.pdf")
    assert refused.status_code == 403, refused.text
    assert refused.json() == {
        "error": {
            "code": "QUOTA_EXCEEDED",
            "message": "this tenant holds 1 documents, its limit is 1; delete some first",
        }
    }

    _wait_for_rate()
    answers = [client.request("GET", "/documents") for _ in range(8)]
    statuses = [answer.status_code for answer in answers]
    assert statuses[:5] == [200] * 5 and 429 in statuses[5:], statuses
    throttled = answers[statuses.index(429)]
    assert throttled.headers["Retry-After"] == "1"
    assert throttled.json()["error"]["code"] == "RATE_LIMITED"
    # Another tenant of the same stack is untouched.
    other = OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"{LIMITED_TENANT}-neighbour")
    assert [other.request("GET", "/documents").status_code for _ in range(8)] == [200] * 8

    _wait_for_rate()
    assert client.delete(document_id).status_code == 200
    usage = _item(aws_clients, usage_table, {"tenant_id": LIMITED_TENANT, "item": "usage"})
    assert usage["documents"] == {"N": "0"} and usage["stored_bytes"] == {"N": "0"}
    assert client.create_upload("third.pdf").status_code == 201
