"""The shared embedding-quota ledger on DynamoDB (the ``CapacityLedgerStore`` port): one item per
budget (model and Region) holding the bookings of the last minute and a version.

A booking reads the item (strongly consistent: a stale read would book on top of a booking it did
not see) and writes it back on condition that the version is still the one read; a writer that lost
the race reads again (rag_ingest.embeddings.capacity). The bookings are one string,
``at_ms:requests:tokens:tenant`` separated by ``;``, the tenant as its number in a second string of
the item's tenants (about 22 bytes a booking). An entry is at least one request, so a minute's
bookings at 2,000 requests a minute stay under about 50 KB, with at most as many tenant ids (64
bytes at most each): inside DynamoDB's 400 KB item limit (docs/architecture.md, "One limiter").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_ingest.adapters.aws import CONDITION_FAILED, resource, translated
from rag_ingest.core.tracing import traced
from rag_ingest.embeddings.capacity import Booking, Ledger

SCOPE_ATTRIBUTE = "scope"
BOOKINGS_ATTRIBUTE = "bookings"
TENANTS_ATTRIBUTE = "tenants"
VERSION_ATTRIBUTE = "version"


def encode_bookings(bookings: Sequence[Booking]) -> tuple[str, str]:
    """The bookings and the tenants they name (each once, numbered by first appearance)."""
    numbers: dict[str, int] = {}
    entries = []
    for booking in bookings:
        number = numbers.setdefault(booking.tenant, len(numbers))
        entries.append(f"{booking.at_us // 1000}:{booking.requests}:{booking.tokens}:{number}")
    return ";".join(entries), ";".join(numbers)


def decode_bookings(text: str, tenants: str = "") -> tuple[Booking, ...]:
    """The bookings of an item; an entry that does not parse is dropped (it only frees capacity).
    An entry without a tenant (written before tenants were recorded) is the anonymous tenant's."""
    names = tenants.split(";")
    bookings = []
    for entry in filter(None, text.split(";")):
        try:
            at_ms, requests, tokens, *number = (int(part) for part in entry.split(":"))
            tenant = names[number[0]] if number else ""
        except (ValueError, IndexError):
            continue
        if len(number) > 1:
            continue
        bookings.append(Booking(at_ms * 1000, requests, tokens, tenant))
    return tuple(bookings)


@traced
class CapacityTable:
    def __init__(self, table_name: str, table_service: Any | None = None) -> None:
        service = table_service if table_service is not None else resource("dynamodb")
        self._table = service.Table(table_name)

    def read(self, scope: str) -> Ledger:
        with translated("read the embedding capacity ledger"):
            item = self._table.get_item(Key={SCOPE_ATTRIBUTE: scope}, ConsistentRead=True).get("Item")
        if not item:
            return Ledger((), 0)
        bookings = decode_bookings(str(item.get(BOOKINGS_ATTRIBUTE, "")), str(item.get(TENANTS_ATTRIBUTE, "")))
        return Ledger(bookings, int(item.get(VERSION_ATTRIBUTE, 0)))

    def write(self, scope: str, bookings: Sequence[Booking], expected_version: int) -> bool:
        entries, tenants = encode_bookings(bookings)
        item = {
            SCOPE_ATTRIBUTE: scope,
            BOOKINGS_ATTRIBUTE: entries,
            TENANTS_ATTRIBUTE: tenants,
            VERSION_ATTRIBUTE: expected_version + 1,
        }
        if expected_version == 0:
            condition: dict[str, Any] = {
                "ConditionExpression": "attribute_not_exists(#scope)",
                "ExpressionAttributeNames": {"#scope": SCOPE_ATTRIBUTE},
            }
        else:
            condition = {
                "ConditionExpression": "#version = :expected",
                "ExpressionAttributeNames": {"#version": VERSION_ATTRIBUTE},
                "ExpressionAttributeValues": {":expected": expected_version},
            }
        with translated("write the embedding capacity ledger", expect={CONDITION_FAILED}) as refusal:
            self._table.put_item(Item=item, **condition)
        return not refusal.refused
