"""Who is calling: ID tokens verified the way API Gateway's JWT authorizer does, and their tenant.

The HTTP API's JWT authorizer (AWS) and the local API server both check issuer, audience, expiry
and the RS256 signature against the issuer's JWKS; the WebSocket authorizer and the local live
channel call :class:`TokenVerifier` for the same checks. The tenant is then validated before it
is used in any key or filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from rag_ingest.core.errors import ApiRefusal

TENANT_CLAIM = "custom:tenant_id"
TENANT_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Cognito ID tokens are RS256; anything else (notably "none" and HS256) is refused.
ALGORITHMS = ("RS256",)


class InvalidTokenError(Exception):
    """The token is missing, malformed, expired, or not signed by the issuer: answer 401."""


class InvalidTenantError(ApiRefusal, ValueError):
    """The token is valid but carries no usable tenant: answer 403."""

    status = 403
    code = "FORBIDDEN"

    @property
    def message(self) -> str:
        return "the token carries no valid tenant"


def validate_tenant_id(value: object) -> str:
    if not isinstance(value, str) or not TENANT_ID_PATTERN.fullmatch(value):
        raise InvalidTenantError(f"the tenant id must match {TENANT_ID_PATTERN.pattern}")
    return value


def tenant_of(claims: Mapping[str, Any]) -> str:
    """The caller's tenant from verified claims, or :class:`InvalidTenantError`."""
    if TENANT_CLAIM not in claims:
        raise InvalidTenantError(f"the token carries no {TENANT_CLAIM} claim")
    return validate_tenant_id(claims[TENANT_CLAIM])


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme is case-insensitive)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InvalidTokenError("no bearer token")
    return token.strip()


@dataclass(frozen=True)
class TokenVerifier:
    """Verifies ID tokens of one issuer for one app client.

    ``jwks`` returns the issuer's key set (``{"keys": [...]}``, or PyJWT's parsed ``PyJWKSet``);
    fetching and caching it is the caller's concern (an adapter in AWS, the local identity provider offline).
    """

    issuer: str
    audience: str
    jwks: Callable[[], Mapping[str, Any] | jwt.PyJWKSet]
    leeway_seconds: int = 0

    def verify(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in ALGORITHMS:
                raise InvalidTokenError(f"algorithm {header.get('alg')!r} is not accepted")
            key = self._signing_key(str(header.get("kid", "")))
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=list(ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options={"require": ["exp", "iat", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidTokenError(str(exc)) from exc
        if claims.get("token_use", "id") != "id":
            raise InvalidTokenError("an ID token is required")
        return claims

    def _signing_key(self, kid: str) -> Any:
        try:
            found = self.jwks()
            key_set = found if isinstance(found, jwt.PyJWKSet) else jwt.PyJWKSet.from_dict(dict(found))
        except jwt.PyJWTError as exc:
            raise InvalidTokenError(f"the issuer's key set is unusable: {exc}") from exc
        for key in key_set.keys:
            if key.key_id == kid:
                return key.key
        raise InvalidTokenError("the token's signing key is not in the issuer's key set")
