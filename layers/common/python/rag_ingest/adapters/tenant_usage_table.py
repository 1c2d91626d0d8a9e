"""The tenant usage table on DynamoDB (the ``UsageStore`` port of rag_ingest.core.limits): key
``tenant_id`` + ``item``; ``usage`` holds the documents and stored-bytes counters, ``rate`` the
request-rate cell (GCRA: one number, the theoretical arrival time in ms), ``pages#YYYY-MM-DD`` a
UTC day's pages (removed by TTL on ``expires_at``).

Every write is one conditional UpdateItem (ADD for counters), so concurrent API calls never lose
a count; a refused condition returns the item as it was (``ReturnValuesOnConditionCheckFailure``).
"""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from rag_ingest.adapters.aws import CONDITION_FAILED, resource, translated
from rag_ingest.core.limits import RATE_ITEM, USAGE_ITEM, RateCell, Usage, pages_item
from rag_ingest.core.tracing import traced

TTL_ATTRIBUTE = "expires_at"
# A tenant's rate cell is written by every one of its requests; a lost race reads the cell again.
MAX_RATE_ATTEMPTS = 4
MAX_REMEMBERED_TENANTS = 10_000
_DESERIALIZE = TypeDeserializer()


def _old_item(error: BaseException | None) -> dict[str, Any]:
    """The item a refused condition saw (the low-level shape boto3's resource leaves untranslated)."""
    item = getattr(error, "response", {}).get("Item") or {}
    return {name: _DESERIALIZE.deserialize(value) for name, value in item.items()}


def _tat(item: dict[str, Any]) -> int | None:
    value = item.get("tat")
    return int(value) if value is not None else None


@traced
class TenantUsageTable:
    def __init__(self, table_name: str, table_service: Any | None = None) -> None:
        service = table_service if table_service is not None else resource("dynamodb")
        self._table = service.Table(table_name)
        # Each tenant's rate cell as this container last saw it: which update to try first.
        self._last_tat: dict[str, int] = {}

    # -- the request rate ---------------------------------------------------------------------
    def take_request(self, tenant_id: str, cell: RateCell, now_ms: int) -> int:
        """One conditional UpdateItem when this container guessed right whether the tenant's cell is
        ahead of now (busy: move it on) or behind (under its rate: start it again from now); a wrong
        guess costs a second one. The conditions, not the guess, keep the bucket exact."""
        key = {"tenant_id": tenant_id, "item": RATE_ITEM}
        last = self._last_tat.get(tenant_id)
        ahead = last is not None and last >= now_ms
        for _ in range(MAX_RATE_ATTEMPTS):
            refused, seen = self._advance(key, cell, now_ms) if ahead else self._restart(key, cell, now_ms)
            if not refused:
                self._remember(tenant_id, seen)
                return 0
            tat, wait_ms = cell.admit(seen, now_ms)
            if tat is None:
                self._remember(tenant_id, seen)
                return wait_ms
            ahead = seen is not None and seen >= now_ms
        # Lost every race to the tenant's own concurrent requests: answer as over its rate.
        return cell.interval_ms

    def _advance(self, key: dict[str, str], cell: RateCell, now_ms: int) -> tuple[bool, int | None]:
        """(refused, the cell's time after the call: the new one, or the one that refused)."""
        with translated("take a request", expect={CONDITION_FAILED}) as refusal:
            response = self._table.update_item(
                Key=key,
                UpdateExpression="SET tat = tat + :interval",
                ConditionExpression="tat BETWEEN :now AND :ceiling",
                ExpressionAttributeValues={
                    ":interval": cell.interval_ms,
                    ":now": now_ms,
                    ":ceiling": now_ms + cell.tolerance_ms,
                },
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        if refusal.refused:
            return True, _tat(_old_item(refusal.error))
        return False, _tat(response.get("Attributes") or {})

    def _restart(self, key: dict[str, str], cell: RateCell, now_ms: int) -> tuple[bool, int | None]:
        with translated("take a request", expect={CONDITION_FAILED}) as refusal:
            self._table.update_item(
                Key=key,
                UpdateExpression="SET tat = :tat",
                ConditionExpression="attribute_not_exists(tat) OR tat < :now",
                ExpressionAttributeValues={":tat": now_ms + cell.interval_ms, ":now": now_ms},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        if refusal.refused:
            return True, _tat(_old_item(refusal.error))
        return False, now_ms + cell.interval_ms

    def _remember(self, tenant_id: str, tat: int | None) -> None:
        if len(self._last_tat) >= MAX_REMEMBERED_TENANTS:
            self._last_tat.clear()
        if tat is not None:
            self._last_tat[tenant_id] = tat

    # -- documents and stored bytes -------------------------------------------------------------
    def reserve_document(self, tenant_id: str, *, max_documents: int, max_stored_bytes: int) -> Usage | None:
        with translated("count a document", expect={CONDITION_FAILED}) as refusal:
            self._table.update_item(
                Key={"tenant_id": tenant_id, "item": USAGE_ITEM},
                UpdateExpression="ADD documents :one",
                ConditionExpression=(
                    "(attribute_not_exists(documents) OR documents < :max_documents) AND "
                    "(attribute_not_exists(stored_bytes) OR stored_bytes < :max_bytes)"
                ),
                ExpressionAttributeValues={":one": 1, ":max_documents": max_documents, ":max_bytes": max_stored_bytes},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        if not refusal.refused:
            return None
        old = _old_item(refusal.error)
        return Usage(documents=int(old.get("documents", 0)), stored_bytes=int(old.get("stored_bytes", 0)))

    def release_document(self, tenant_id: str, stored_bytes: int) -> None:
        with translated("give a document back"):
            self._table.update_item(
                Key={"tenant_id": tenant_id, "item": USAGE_ITEM},
                UpdateExpression="ADD documents :minus_one, stored_bytes :minus_bytes",
                ExpressionAttributeValues={":minus_one": -1, ":minus_bytes": -stored_bytes},
            )

    def add_stored_bytes(self, tenant_id: str, stored_bytes: int) -> None:
        with translated("count stored bytes"):
            self._table.update_item(
                Key={"tenant_id": tenant_id, "item": USAGE_ITEM},
                UpdateExpression="ADD stored_bytes :bytes",
                ExpressionAttributeValues={":bytes": stored_bytes},
            )

    def read_usage(self, tenant_id: str) -> Usage:
        with translated("read usage"):
            item = self._table.get_item(Key={"tenant_id": tenant_id, "item": USAGE_ITEM}).get("Item") or {}
        return Usage(documents=int(item.get("documents", 0)), stored_bytes=int(item.get("stored_bytes", 0)))

    # -- pages per day ---------------------------------------------------------------------------
    def add_pages(self, tenant_id: str, day: str, pages: int, expires_at: int) -> None:
        with translated("count pages"):
            self._table.update_item(
                Key={"tenant_id": tenant_id, "item": pages_item(day)},
                UpdateExpression="ADD pages :pages SET #ttl = :expires",
                ExpressionAttributeNames={"#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":pages": pages, ":expires": expires_at},
            )

    def pages_on(self, tenant_id: str, day: str) -> int:
        with translated("read pages"):
            item = self._table.get_item(Key={"tenant_id": tenant_id, "item": pages_item(day)}).get("Item") or {}
        return int(item.get("pages", 0))
