"""The shared embedding-quota ledger on moto's DynamoDB (rag_ingest.adapters.capacity_table) under
the limiter: concurrent Embed tasks' bookings all land (compare-and-set on the version, the losers
read again) and never put more than the quota in any window; a stale version is refused."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from rag_ingest.adapters.capacity_table import CapacityTable, decode_bookings, encode_bookings
from rag_ingest.embeddings.capacity import (
    MICROSECONDS,
    QUOTA_WINDOW_US,
    WINDOW_MARGIN_US,
    Booking,
    CapacityLimiter,
    EmbeddingQuota,
    Ledger,
)

from tests.support.aws import moto_server

pytestmark = pytest.mark.integration
TABLE = "embedding-capacity"


@pytest.fixture(scope="module")
def table() -> Iterator[CapacityTable]:
    with moto_server():
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "scope", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "scope", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield CapacityTable(TABLE)


def test_a_ledger_is_written_once_per_version(table: CapacityTable) -> None:
    assert table.read("new") == Ledger((), 0)
    bookings = [Booking(1_000_000_000, 16, 3700), Booking(1_000_500_000, 3, 690)]
    assert table.write("new", bookings, 0)
    assert not table.write("new", bookings, 0)  # someone wrote version 1 already
    assert table.read("new") == Ledger(tuple(bookings), 1)
    assert not table.write("new", [], 5)
    assert table.write("new", bookings[1:], 1)
    assert table.read("new") == Ledger(tuple(bookings[1:]), 2)
    entries, tenants = encode_bookings(bookings)
    assert decode_bookings(entries + ";junk;1:2;5:1:1:9", tenants) == tuple(bookings)


def test_each_booking_keeps_its_tenant_and_an_old_item_reads_as_the_anonymous_tenant(table: CapacityTable) -> None:
    bookings = [Booking(2_000_000_000, 16, 3700, "acme"), Booking(2_000_000_000, 2, 40, "globex"),
                Booking(2_000_400_000, 1, 9, "acme"), Booking(2_000_500_000, 1, 9, "")]  # fmt: skip
    assert table.write("tenants", bookings, 0)
    assert table.read("tenants") == Ledger(tuple(bookings), 1)
    item = boto3.resource("dynamodb").Table(TABLE).get_item(Key={"scope": "tenants"})["Item"]
    assert item["tenants"] == "acme;globex;"  # each tenant once: a booking carries its number
    # An item written before tenants were recorded: three parts an entry, no tenants attribute.
    boto3.resource("dynamodb").Table(TABLE).put_item(Item={"scope": "old", "bookings": "2000000:3:9", "version": 4})
    assert table.read("old") == Ledger((Booking(2_000_000_000, 3, 9, ""),), 4)


def test_concurrent_tasks_book_the_quota_and_no_more(table: CapacityTable) -> None:
    """Eight tasks at the same moment, five batches of 16 each, against 200 requests a minute:
    every booking lands, none is lost to the races, and no window holds more than 200."""
    now = 9_000 * MICROSECONDS
    quota = EmbeddingQuota(requests_per_minute=200, tokens_per_minute=None, headroom=1.0)

    def task(_: int) -> list[float]:
        limiter = CapacityLimiter(table, quota, "shared", max_wait_seconds=3600, clock_us=lambda: now)
        return [moment for _ in range(5) for moment in limiter.schedule([100] * 16)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        moments = sorted(m for sent in pool.map(task, range(8)) for m in sent)
    assert len(moments) == 8 * 5 * 16
    window = (QUOTA_WINDOW_US + WINDOW_MARGIN_US) / MICROSECONDS
    for index, moment in enumerate(moments):
        in_window = sum(1 for other in moments[: index + 1] if other > moment - window)
        assert in_window <= 200, moment
    # The quota is used, not wasted: 640 calls in four windows' time (200, 200, 200, 40).
    assert moments[-1] == pytest.approx(now / MICROSECONDS + 3 * window)
    ledger = table.read("shared")
    assert sum(b.requests for b in ledger.bookings) == 640 and ledger.version == 40
