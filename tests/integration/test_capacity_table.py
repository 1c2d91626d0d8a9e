"""The shared embedding-quota timeline on moto's DynamoDB (rag_ingest.adapters.capacity_table):
concurrent reservers get stretches that never overlap and leave no gap, a booked-out timeline
refuses without writing, and an idle one starts from now."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from rag_ingest.adapters.capacity_table import FREE_AT_ATTRIBUTE, SCOPE_ATTRIBUTE, CapacityTable
from rag_ingest.embeddings.capacity import MICROSECONDS, Reservation

from tests.support.aws import moto_server

pytestmark = pytest.mark.integration
TABLE = "embedding-capacity"


@pytest.fixture(scope="module")
def table() -> Iterator[CapacityTable]:
    with moto_server():
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": SCOPE_ATTRIBUTE, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": SCOPE_ATTRIBUTE, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield CapacityTable(TABLE)


def free_at(scope: str) -> int:
    item = boto3.resource("dynamodb").Table(TABLE).get_item(Key={SCOPE_ATTRIBUTE: scope}, ConsistentRead=True)
    return int(item["Item"][FREE_AT_ATTRIBUTE])


def test_an_idle_timeline_starts_now_and_a_booked_one_after_what_is_booked(table: CapacityTable) -> None:
    now = 1_000 * MICROSECONDS
    first = table.reserve("idle", 500_000, now, now + 30 * MICROSECONDS)
    assert first == Reservation(granted=True, start_us=now, queue_end_us=now + 500_000)
    second = table.reserve("idle", 250_000, now + 100_000, now + 30 * MICROSECONDS)
    assert (second.granted, second.start_us, second.queue_end_us) == (True, now + 500_000, now + 750_000)
    # Long after: the timeline is idle again and restarts from the caller's now, not from the past.
    later = now + 60 * MICROSECONDS
    third = table.reserve("idle", 1_000, later, later + MICROSECONDS)
    assert (third.granted, third.start_us) == (True, later)
    assert free_at("idle") == later + 1_000


def test_a_timeline_booked_past_the_latest_start_refuses_and_writes_nothing(table: CapacityTable) -> None:
    now = 5_000 * MICROSECONDS
    table.reserve("busy", 40 * MICROSECONDS, now, now)
    refused = table.reserve("busy", MICROSECONDS, now + MICROSECONDS, now + 10 * MICROSECONDS)
    assert not refused.granted and refused.queue_end_us == now + 40 * MICROSECONDS
    assert free_at("busy") == now + 40 * MICROSECONDS


def test_concurrent_reservations_tile_the_timeline(table: CapacityTable) -> None:
    """Eight threads, 15 reservations each, all at the same 'now': every stretch is its own,
    back to back from now, whatever order the conditional writes landed in."""
    now = 9_000 * MICROSECONDS
    cost = 10_000

    def book(_: int) -> list[Reservation]:
        return [table.reserve("shared", cost, now, now + 3600 * MICROSECONDS) for _ in range(15)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        reservations = [r for batch in pool.map(book, range(8)) for r in batch]
    assert all(r.granted for r in reservations)
    starts = sorted(r.start_us for r in reservations)
    assert starts == [now + i * cost for i in range(8 * 15)]
    assert free_at("shared") == now + 8 * 15 * cost
