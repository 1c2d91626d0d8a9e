"""The MCP endpoint: the SDK's streamable-HTTP app, stateless with JSON responses, for one request
per invocation, behind the SDK's bearer auth and with its protected-resource metadata (RFC 9728).

Stateless: no session outlives a request, so any container serves any request, GET (no stream to
open) and DELETE (no session to end) answer 405, and no per-request state is kept between calls.
May import the MCP SDK, anyio and this package.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl

from .asgi import request_body, request_scope, respond

#: Where clients that got no ``resource_metadata`` look last (the MCP authorization spec's fallback).
ROOT_METADATA_PATH = "/.well-known/oauth-protected-resource"
# The SDK logs each stateless request's session start and end at INFO: noise, one pair per call.
logging.getLogger("mcp").setLevel(logging.WARNING)


def auth_settings(resource_url: str, issuer: str) -> AuthSettings:
    """The MCP server as an OAuth resource server of the user pool: tokens come from the issuer; the
    audience (the app client) is the token verifier's check, as the API's JWT authorizer's."""
    return AuthSettings(
        issuer_url=AnyHttpUrl(issuer),
        resource_server_url=AnyHttpUrl(resource_url),
        validate_token_resource=False,
    )


def metadata_path(resource_url: str) -> str:
    """RFC 9728 section 3.1: the well-known path inserted before the resource's path (``/mcp``)."""
    return urlsplit(str(build_resource_metadata_url(AnyHttpUrl(resource_url)))).path


class McpEndpoint:
    """Serves one API Gateway event with ``server`` (built with :func:`auth_settings` and a token verifier)."""

    def __init__(self, server: MCPServer[Any], resource_url: str, issuer: str) -> None:
        self._server = server
        self._resource_url = resource_url
        self._path = urlsplit(resource_url).path
        # The metadata at the root too, for clients that find no header to follow.
        [route] = create_protected_resource_routes(AnyHttpUrl(resource_url), [AnyHttpUrl(issuer)])
        server.custom_route(ROOT_METADATA_PATH, methods=["GET", "OPTIONS"])(route.endpoint)
        # Only the public host: API Gateway's (the local stack's) name, never another a client was led to.
        self._security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=[urlsplit(resource_url).netloc]
        )

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        return anyio.run(self._handle, event)

    async def _handle(self, event: dict[str, Any]) -> dict[str, Any]:
        scope = request_scope(event, self._resource_url)
        if scope["path"] == self._path and scope["method"] != "POST":
            # The SDK would open a GET stream that never ends here; the spec allows 405 for GET and DELETE.
            return method_not_allowed(scope["method"])
        # A session manager serves one run: a fresh app per invocation, the server (tools) kept warm.
        app = self._server.streamable_http_app(
            streamable_http_path=self._path,
            json_response=True,
            stateless_http=True,
            transport_security=self._security,
        )
        async with app.router.lifespan_context(app):
            return await respond(app, scope, request_body(event))


def method_not_allowed(method: str) -> dict[str, Any]:
    """405 with ``Allow: POST`` and a JSON-RPC error body, as the SDK shapes its own refusals."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"{method} is not served: POST"}}
    return {
        "statusCode": 405,
        "headers": {"content-type": "application/json", "allow": "POST"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }
