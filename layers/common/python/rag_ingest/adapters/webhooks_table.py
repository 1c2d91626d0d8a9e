"""The webhooks table (DynamoDB, key ``tenant_id`` + ``endpoint_id``): a tenant's endpoints and their
signing secrets. Why DynamoDB and not Secrets Manager for the secrets: docs/webhooks.md."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from rag_ingest.adapters.aws import error_code, resource, translate
from rag_ingest.core.tracing import traced
from rag_ingest.webhooks.model import WebhookEndpoint

_EXISTS = "attribute_exists(tenant_id) AND attribute_exists(endpoint_id)"


@traced
class WebhooksTable:
    def __init__(self, table_name: str, table: Any | None = None) -> None:
        self._table = table if table is not None else resource("dynamodb").Table(table_name)

    def create(self, endpoint: WebhookEndpoint) -> None:
        try:
            self._table.put_item(
                Item=endpoint.model_dump(exclude_none=True), ConditionExpression="attribute_not_exists(endpoint_id)"
            )
        except ClientError as exc:
            raise translate(exc, "create webhook endpoint") from exc

    def find(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        try:
            item = self._table.get_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id}, ConsistentRead=True
            ).get("Item")
        except ClientError as exc:
            raise translate(exc, "read webhook endpoint") from exc
        return WebhookEndpoint.model_validate(item) if item else None

    def list_for_tenant(self, tenant_id: str) -> list[WebhookEndpoint]:
        items: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {"KeyConditionExpression": Key("tenant_id").eq(tenant_id), "ConsistentRead": True}
        try:
            while True:
                page = self._table.query(**arguments)
                items.extend(page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    break
                arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except ClientError as exc:
            raise translate(exc, "list webhook endpoints") from exc
        return [WebhookEndpoint.model_validate(item) for item in items]

    def delete(self, tenant_id: str, endpoint_id: str) -> bool:
        try:
            self._table.delete_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id}, ConditionExpression=_EXISTS
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc, "delete webhook endpoint") from exc
        return True

    def set_secret(self, tenant_id: str, endpoint_id: str, secret: str, rotated_at: str) -> WebhookEndpoint | None:
        try:
            response = self._table.update_item(
                Key={"tenant_id": tenant_id, "endpoint_id": endpoint_id},
                UpdateExpression="SET secret = :secret, secret_rotated_at = :at",
                ConditionExpression=_EXISTS,
                ExpressionAttributeValues={":secret": secret, ":at": rotated_at},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise translate(exc, "rotate webhook secret") from exc
        return WebhookEndpoint.model_validate(response["Attributes"])
