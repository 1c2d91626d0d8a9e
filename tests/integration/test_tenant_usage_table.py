"""The tenant usage table on moto's DynamoDB (rag_ingest.adapters.tenant_usage_table) under the limits
(rag_ingest.core.limits): the rate cell admits a burst and no more, even to concurrent requests; the
document and stored-bytes counters refuse at their limits with the usage in the message; a day's
pages refuse new uploads until UTC midnight; counts come back when a document goes."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import boto3
import pytest
from rag_ingest.adapters.tenant_usage_table import TenantUsageTable
from rag_ingest.core.limits import (
    LimitsTable,
    PagesPerDayExceededError,
    QuotaExceededError,
    RateCell,
    RateLimitedError,
    TenantLimiter,
    Usage,
    UsageCounter,
)
from rag_ingest.core.record import DocumentRecord, DocumentStatus

from tests.support.aws import moto_server
from tests.support.operations import create_tenant_usage_table

pytestmark = pytest.mark.integration
TABLE = "tenant-usage"
NOON = datetime(2026, 12, 7, 12, 0, tzinfo=UTC).timestamp()
DEFAULTS = {
    "documents": 1000,
    "stored_bytes": 10**9,
    "pages_per_day": 10_000,
    "requests_per_second": 10,
    "burst_requests": 5,
    "sources": 50,
    "webhooks": 10,
}


@pytest.fixture(scope="module")
def table() -> Iterator[TenantUsageTable]:
    with moto_server():
        create_tenant_usage_table(TABLE)
        yield TenantUsageTable(TABLE)


def _limiter(table: TenantUsageTable, overrides: dict[str, dict[str, int]], now: list[float]) -> TenantLimiter:
    limits = LimitsTable.model_validate({"defaults": DEFAULTS, "overrides": overrides})
    return TenantLimiter(limits, table, clock=lambda: now[0])


def _record(
    tenant: str, size: int, *, uploaded_by: str | None = "user-1", source_id: str | None = None
) -> DocumentRecord:
    return DocumentRecord(
        document_id="01JABCDEFGHJKMNPQRSTVWXYZ0",
        tenant_id=tenant,
        status=DocumentStatus.QUEUED,
        size_bytes=size,
        uploaded_by=uploaded_by,
        source_id=source_id,
        created_at="2026-12-07T12:00:00Z",
        updated_at="2026-12-07T12:00:00Z",
    )


def test_the_rate_cell_admits_the_burst_then_refills(table: TenantUsageTable) -> None:
    cell = RateCell.of(requests_per_second=10, burst_requests=5)
    now = 1_000_000
    assert [table.take_request("rate-a", cell, now) for _ in range(5)] == [0] * 5
    assert table.take_request("rate-a", cell, now) == 100
    assert table.take_request("rate-b", cell, now) == 0  # another tenant's cell is its own
    assert table.take_request("rate-a", cell, now + 100) == 0  # one token back after 100 ms
    assert table.take_request("rate-a", cell, now + 100) == 100
    # Idle for a minute: the whole burst is back (the cell starts again from now).
    assert [table.take_request("rate-a", cell, now + 60_000) for _ in range(6)] == [0] * 5 + [100]


def test_concurrent_requests_never_take_more_than_the_burst(table: TenantUsageTable) -> None:
    cell = RateCell.of(requests_per_second=1, burst_requests=10)
    now = 5_000_000
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: table.take_request("rate-busy", cell, now), range(30)))
    assert answers.count(0) == 10, answers
    assert all(wait >= 1000 for wait in answers if wait)


def test_the_limiter_answers_429_with_retry_after(table: TenantUsageTable) -> None:
    now = [NOON]
    limiter = _limiter(table, {"slow": {"requests_per_second": 1, "burst_requests": 2}}, now)
    limiter.admit_request("slow")
    limiter.admit_request("slow")
    with pytest.raises(RateLimitedError) as refused:
        limiter.admit_request("slow")
    assert refused.value.headers == {"Retry-After": "1"} and "1 requests per second" in refused.value.message
    now[0] += 1.0
    limiter.admit_request("slow")


def test_documents_are_counted_refused_at_the_limit_and_given_back(table: TenantUsageTable) -> None:
    now = [NOON]
    limiter = _limiter(table, {"tiny": {"documents": 2}}, now)
    limiter.reserve_upload("tiny")
    limiter.reserve_upload("tiny")
    with pytest.raises(QuotaExceededError, match="this tenant holds 2 documents, its limit is 2") as refused:
        limiter.reserve_upload("tiny")
    assert refused.value.status == 403 and refused.value.code == "QUOTA_EXCEEDED"
    assert table.read_usage("tiny") == Usage(documents=2, stored_bytes=0)  # the refusal counted nothing
    limiter.document_deleted(_record("tiny", 0))
    limiter.reserve_upload("tiny")
    limiter.release_upload("tiny")  # its record was never made
    assert table.read_usage("tiny") == Usage(documents=1, stored_bytes=0)


def test_stored_bytes_refuse_new_uploads_at_the_limit(table: TenantUsageTable) -> None:
    now = [NOON]
    limiter = _limiter(table, {"full": {"stored_bytes": 3 * 2**30}}, now)
    counter = UsageCounter(table, clock=lambda: now[0])
    limiter.reserve_upload("full")
    counter.upload_arrived(_record("full", 3 * 2**30))
    counter.upload_arrived(_record("full", 500, uploaded_by=None))  # put straight in the bucket: not counted
    counter.upload_arrived(_record("full", 500, source_id="src_1"))  # a source's item: not counted
    assert table.read_usage("full") == Usage(documents=1, stored_bytes=3 * 2**30)
    with pytest.raises(QuotaExceededError, match=r"this tenant stores 3\.00 GiB, its limit is 3\.00 GiB"):
        limiter.reserve_upload("full")
    limiter.document_deleted(_record("full", 3 * 2**30))
    assert table.read_usage("full") == Usage(documents=0, stored_bytes=0)
    limiter.reserve_upload("full")


def test_pages_per_day_refuse_new_uploads_until_utc_midnight(table: TenantUsageTable) -> None:
    now = [NOON]
    limiter = _limiter(table, {"busy": {"pages_per_day": 100}}, now)
    counter = UsageCounter(table, clock=lambda: now[0])
    counter.pages_parsed("busy", 60)
    limiter.reserve_upload("busy")  # 60 of 100: accepted
    counter.pages_parsed("busy", 60)  # an accepted document finishes and counts past the limit
    with pytest.raises(PagesPerDayExceededError, match="this tenant ingested 120 pages today") as refused:
        limiter.reserve_upload("busy")
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": str(12 * 3600)}
    item = boto3.resource("dynamodb").Table(TABLE).get_item(Key={"tenant_id": "busy", "item": "pages#2026-12-07"})
    assert int(item["Item"]["expires_at"]) > NOON + 86_400  # removed by TTL after its day
    now[0] += 12 * 3600  # the next UTC day
    limiter.reserve_upload("busy")
