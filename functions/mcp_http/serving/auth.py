"""The caller's ID token, verified for the MCP SDK's bearer middleware as the HTTP API's JWT
authorizer verifies it (rag_ingest.core.auth.TokenVerifier: issuer, audience, expiry, RS256
signature against the user pool's keys), and the principal of the request being served.

May import the MCP SDK and ``rag_ingest.core``.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from rag_ingest.core.access import Principal
from rag_ingest.core.auth import InvalidTenantError, InvalidTokenError, TokenVerifier


class IdTokenVerifier:
    """The SDK's ``TokenVerifier``: the user pool's ID tokens for the app client, else ``None`` (the
    SDK then answers 401 with ``WWW-Authenticate: Bearer ... resource_metadata="..."``)."""

    def __init__(self, verifier: TokenVerifier) -> None:
        self._verifier = verifier

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            # The key set may be fetched (once per container): off the event loop.
            claims: dict[str, Any] = await anyio.to_thread.run_sync(self._verifier.verify, token)
        except InvalidTokenError:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("aud", "")),
            scopes=[],
            expires_at=int(claims["exp"]),
            subject=str(claims.get("sub") or "") or None,
            claims=claims,
        )


def current_principal(tenant_admin_group: str) -> Principal:
    """The caller of the tool call being served: the verified token's tenant, subject and groups
    (``InvalidTenantError``, the API's 403, for a token without a tenant)."""
    token = get_access_token()
    if token is None or token.claims is None:  # the bearer middleware admits no request without one
        raise InvalidTenantError("no verified token")
    return Principal.of(token.claims, tenant_admin_group)
