"""WebSocket API ``$connect`` / ``$disconnect``: record and forget the tenant's connections."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.adapters.live_connections import DynamoConnectionStore
from rag_ingest.core.auth import InvalidTenantError
from rag_ingest.core.config import LiveConnectionsEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.live.connections import close_connection, open_connection

ENV = LiveConnectionsEnv.from_env()
store = DynamoConnectionStore(ENV.connections_table)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = event.get("requestContext") or {}
    connection_id = str(request.get("connectionId") or "")
    if request.get("routeKey") == "$disconnect":
        close_connection(store, connection_id)
        return {"statusCode": 200}
    try:
        open_connection(store, connection_id, request.get("authorizer") or {}, ttl_seconds=ENV.connection_ttl_seconds)
    except (InvalidTenantError, ValueError) as exc:
        # Only reachable if the route were deployed without the authorizer: refuse the connection.
        logger.warning("connection refused", extra={"reason": str(exc)})
        return {"statusCode": 403}
    return {"statusCode": 200}
