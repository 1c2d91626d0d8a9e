"""WebSocket API ``$connect`` authorizer (REQUEST, identity source ``route.request.querystring.token``).

The token is a Cognito ID token, verified like the HTTP API's JWT authorizer does; the policy's
context carries the tenant to the ``$connect`` handler.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import LiveAuthorizerEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.live.connections import authorize_connect
from rag_ingest.wiring import token_verifier

ENV = LiveAuthorizerEnv.from_env()
# The key set is fetched on first use and cached for the life of this execution environment.
verifier = token_verifier(ENV)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    token = (event.get("queryStringParameters") or {}).get("token")
    return authorize_connect(verifier, token, str(event.get("methodArn", "")))
