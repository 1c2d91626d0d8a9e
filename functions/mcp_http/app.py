"""The MCP server over streamable HTTP (docs/mcp.md): ``POST /mcp`` and the protected-resource
metadata, behind the HTTP API on routes without its JWT authorizer, so that this function answers
a request without a valid ID token 401 with the ``WWW-Authenticate`` header the MCP authorization
spec asks for (docs/decisions/mcp-over-http.md).

The tools are the stdio server's (``rag_ingest_client.mcp_server.build_server``), calling the domain
services in process as the verified caller. The environment is validated at the cold start.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import AnswerEnv, McpEnv, SearchEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.wiring import McpServices, build_mcp, token_verifier
from rag_ingest_client.mcp_server import build_server

if __package__:  # functions.mcp_http.app: the tests and mypy import it from the repository
    from .serving.auth import IdTokenVerifier, current_principal
    from .serving.endpoint import McpEndpoint, auth_settings
    from .serving.tools_api import InProcessApi
else:  # Lambda (and the local stack's worker) import app.py as a top-level module
    from serving.auth import IdTokenVerifier, current_principal  # type: ignore[no-redef]
    from serving.endpoint import McpEndpoint, auth_settings  # type: ignore[no-redef]
    from serving.tools_api import InProcessApi  # type: ignore[no-redef]

ENV = McpEnv.from_env()
SEARCH_ENV = SearchEnv.from_env()
ANSWER_ENV = AnswerEnv.from_env()


@cache
def services() -> McpServices:
    """Built on the first tool call, kept by the container."""
    return build_mcp(ENV, SEARCH_ENV, ANSWER_ENV)


endpoint = McpEndpoint(
    build_server(
        InProcessApi(services, lambda: current_principal(ENV.tenant_admin_group)),
        auth=auth_settings(ENV.mcp_resource_url, ENV.token_issuer),
        token_verifier=IdTokenVerifier(token_verifier(ENV)),
    ),
    ENV.mcp_resource_url,
    ENV.token_issuer,
)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return endpoint.handle(event)
