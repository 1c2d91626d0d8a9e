"""The WebSocket connections table and API Gateway's management API (PostToConnection)."""

from __future__ import annotations

from typing import Any

import boto3
from boto3.dynamodb.conditions import Key
from botocore.config import Config

from rag_ingest.adapters.aws import BOTO_CONFIG, error_code, http_status, resource, translated
from rag_ingest.core.errors import TransientError
from rag_ingest.core.tracing import traced
from rag_ingest.live.connections import Connection, ConnectionGoneError, PostThrottledError

TENANT_INDEX = "by_tenant"

# One attempt per call: LivePusher owns the retry policy for throttled posts, so retries do not multiply.
_SINGLE_ATTEMPT = BOTO_CONFIG.merge(Config(retries={"mode": "standard", "max_attempts": 1}))
_THROTTLED = frozenset({"LimitExceededException", "TooManyRequestsException", "ThrottlingException"})
_GONE, _THROTTLED_POST = "gone", "throttled"


@traced
class DynamoConnectionStore:
    """``connection_id`` (key), ``tenant_id`` (GSI ``by_tenant``, keys only), ``subject``, ``groups``,
    times, TTL ``expires_at``."""

    def __init__(self, table_name: str, dynamodb_resource: Any | None = None) -> None:
        self._table = (dynamodb_resource or resource("dynamodb")).Table(table_name)

    def put(self, connection: Connection) -> None:
        with translated("put connection"):
            self._table.put_item(
                Item={
                    "connection_id": connection.connection_id,
                    "tenant_id": connection.tenant_id,
                    "subject": connection.subject,
                    "groups": list(connection.groups),
                    "connected_at": connection.connected_at,
                    "expires_at": connection.expires_at,
                }
            )

    def delete(self, connection_id: str) -> None:
        with translated("delete connection"):
            self._table.delete_item(Key={"connection_id": connection_id})

    def get(self, connection_id: str) -> Connection | None:
        with translated("get connection"):
            item = self._table.get_item(Key={"connection_id": connection_id}, ConsistentRead=True).get("Item")
        return _connection(item) if item else None

    def for_tenant(self, tenant_id: str) -> list[str]:
        ids: list[str] = []
        request: dict[str, Any] = {
            "IndexName": TENANT_INDEX,
            "KeyConditionExpression": Key("tenant_id").eq(tenant_id),
            "ProjectionExpression": "connection_id",
        }
        with translated("query connections"):
            while True:
                page = self._table.query(**request)
                ids.extend(str(item["connection_id"]) for item in page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    return ids
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def connections_for_tenant(self, tenant_id: str) -> list[Connection]:
        """The tenant's connections with their subject and groups: the ids from the tenant index
        (its projection is keys only), then the items by BatchGetItem, 100 keys a request
        (https://docs.amazonaws.cn/sdkfornet/v3/apidocs/items/DynamoDBv2/MIDynamoDBBatchGetItemBatchGetItemRequest.html);
        unprocessed keys are asked again. A connection deleted in between is simply not returned."""
        ids = self.for_tenant(tenant_id)
        connections: list[Connection] = []
        name = self._table.name
        client = self._table.meta.client
        for start in range(0, len(ids), 100):
            keys: list[dict[str, Any]] = [{"connection_id": i} for i in ids[start : start + 100]]
            for _attempt in range(5):
                with translated("read connections"):
                    answer = client.batch_get_item(RequestItems={name: {"Keys": keys}})
                connections.extend(_connection(item) for item in answer.get("Responses", {}).get(name, []))
                keys = answer.get("UnprocessedKeys", {}).get(name, {}).get("Keys", [])
                if not keys:
                    break
            else:
                raise TransientError("read connections: keys left unprocessed after 5 requests")
        return [c for c in connections if c.tenant_id == tenant_id]


def _connection(item: dict[str, Any]) -> Connection:
    return Connection(
        connection_id=str(item["connection_id"]),
        tenant_id=str(item.get("tenant_id") or ""),
        subject=str(item.get("subject") or ""),
        connected_at=int(item.get("connected_at") or 0),
        expires_at=int(item.get("expires_at") or 0),
        groups=tuple(str(group) for group in item.get("groups") or ()),
    )


@traced
class ManagementApiPoster:
    """PostToConnection on the stage's callback URL (``https://<api>.execute-api.<region>.amazonaws.com/<stage>``)."""

    def __init__(self, callback_url: str, management_client: Any | None = None) -> None:
        self._client = management_client or boto3.client(
            "apigatewaymanagementapi", endpoint_url=callback_url, config=_SINGLE_ATTEMPT
        )

    def post(self, connection_id: str, data: bytes) -> None:
        with translated("post to connection", expect={_GONE, _THROTTLED_POST}, code_of=_post_answer) as refusal:
            self._client.post_to_connection(ConnectionId=connection_id, Data=data)
        if refusal.code == _GONE:
            raise ConnectionGoneError(connection_id) from refusal.error
        if refusal.refused:
            code = error_code(refusal.error) or http_status(refusal.error)
            raise PostThrottledError(f"{connection_id}: {code}") from refusal.error


def _post_answer(exc: BaseException) -> str:
    """What a PostToConnection error means to the poster: the connection is gone, the post was
    throttled, or else the error's own code."""
    code, status = error_code(exc), http_status(exc)
    if code == "GoneException" or status == 410:
        return _GONE
    if code in _THROTTLED or status == 429:
        return _THROTTLED_POST
    return code
