"""The webhooks table (DynamoDB, key ``tenant_id`` + ``endpoint_id``): a tenant's endpoints and their
signing secrets, and the record of each delivery attempt. Why DynamoDB and not Secrets Manager for
the secrets: docs/webhooks.md.

Two kinds of item share a tenant's partition, told apart by the sort key's prefix: an endpoint
(``wh_…``) and a delivery attempt (``dlv#{endpoint id}#{time}#{webhook id}#{attempt}``, with the TTL
attribute ``expires_at``). Every query names its prefix, so the endpoints' query never reads an
attempt and the attempts' query reads at most ``limit`` items, newest first."""

from __future__ import annotations

import time
from datetime import datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from rag_ingest.adapters.aws import CONDITION_FAILED, resource, translated
from rag_ingest.core.tracing import traced
from rag_ingest.webhooks.model import (
    DELIVERY_RECORD_TTL_SECONDS,
    ENDPOINT_ID_PREFIX,
    DeliveryAttempt,
    WebhookEndpoint,
)

_EXISTS = "attribute_exists(tenant_id) AND attribute_exists(endpoint_id)"
DELIVERY_PREFIX = "dlv#"
#: The table's TTL attribute (infra/constructs/webhooks.py): unix seconds.
TTL_ATTRIBUTE = "expires_at"
_ATTEMPT_FIELDS = tuple(DeliveryAttempt.model_fields)


def delivery_key_prefix(endpoint_id: str) -> str:
    return f"{DELIVERY_PREFIX}{endpoint_id}#"


@traced
class WebhooksTable:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._table = table if table is not None else resource("dynamodb").Table(table_name)

    def create(self, endpoint: WebhookEndpoint) -> None:
        with translated("create webhook endpoint"):
            self._table.put_item(
                Item=endpoint.model_dump(exclude_none=True), ConditionExpression="attribute_not_exists(endpoint_id)"
            )

    def find(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        with translated("read webhook endpoint"):
            item = self._table.get_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id}, ConsistentRead=True
            ).get("Item")
        return WebhookEndpoint.model_validate(item) if item else None

    def list_for_tenant(self, tenant_id: str) -> list[WebhookEndpoint]:
        items: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {
            "KeyConditionExpression": Key("tenant_id").eq(tenant_id)
            & Key("endpoint_id").begins_with(ENDPOINT_ID_PREFIX),
            "ConsistentRead": True,
        }
        with translated("list webhook endpoints"):
            while True:
                page = self._table.query(**arguments)
                items.extend(page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    break
                arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [WebhookEndpoint.model_validate(item) for item in items]

    def delete(self, tenant_id: str, endpoint_id: str) -> bool:
        with translated("delete webhook endpoint", expect={CONDITION_FAILED}) as refusal:
            self._table.delete_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id}, ConditionExpression=_EXISTS
            )
        return not refusal.refused

    def set_secret(self, tenant_id: str, endpoint_id: str, secret: str, rotated_at: str) -> WebhookEndpoint | None:
        with translated("rotate webhook secret", expect={CONDITION_FAILED}) as refusal:
            response = self._table.update_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id},
                UpdateExpression="SET secret = :secret, secret_rotated_at = :at",
                ConditionExpression=_EXISTS,
                ExpressionAttributeValues={":secret": secret, ":at": rotated_at},
                ReturnValues="ALL_NEW",
            )
        if refusal.refused:
            return None
        return WebhookEndpoint.model_validate(response["Attributes"])

    # -- delivery attempts -------------------------------------------------------------------------

    def record_delivery(self, tenant_id: str, endpoint_id: str, attempt: DeliveryAttempt) -> None:
        """One item per attempt (a PutItem: no read first); DynamoDB's TTL removes it a week later."""
        sort_key = f"{delivery_key_prefix(endpoint_id)}{attempt.at}#{attempt.webhook_id}#{attempt.attempt:06d}"
        item = {
            "tenant_id": tenant_id,
            "endpoint_id": sort_key,
            TTL_ATTRIBUTE: int(datetime.fromisoformat(attempt.at).timestamp()) + DELIVERY_RECORD_TTL_SECONDS,
            **attempt.model_dump(exclude_none=True),
        }
        with translated("record webhook delivery"):
            self._table.put_item(Item=item)

    def recent_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[DeliveryAttempt]:
        """The newest ``limit`` attempts (the sort key's time orders them), expired ones left out:
        DynamoDB deletes expired items "typically within two days of expiration", and until then
        they "still show up in reads, queries, and scans"
        (https://docs.aws.amazon.com/goto/SdkForKotlin/dynamodb-2012-08-10/UpdateTimeToLive)."""
        with translated("list webhook deliveries"):
            page = self._table.query(
                KeyConditionExpression=Key("tenant_id").eq(tenant_id)
                & Key("endpoint_id").begins_with(delivery_key_prefix(endpoint_id)),
                ScanIndexForward=False,
                Limit=limit,
            )
        now = time.time()
        return [
            DeliveryAttempt.model_validate({name: _plain(item[name]) for name in _ATTEMPT_FIELDS if name in item})
            for item in page.get("Items", [])
            if int(item.get(TTL_ATTRIBUTE, now + 1)) > now
        ]


def _plain(value: Any) -> Any:
    """DynamoDB numbers come back as Decimal."""
    return int(value) if isinstance(value, Decimal) else value
