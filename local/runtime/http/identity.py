"""The local identity provider: an OpenID-style issuer standing in for the Cognito user pool.

Signs RS256 ID tokens shaped like Cognito's (``iss``, ``aud``, ``exp``, ``sub``, ``token_use: "id"``,
``cognito:username``, ``cognito:groups``, ``custom:tenant_id``) with PyJWT and publishes the key set,
so the HTTP API's JWT authorizer and the WebSocket ``$connect`` authorizer verify them as in AWS.
The server routes ``/_local/oidc/`` here: the OpenID configuration, the key set (also at Cognito's
``.well-known/jwks.json``) and ``POST token``, a dev-only sign-in without a password for any
tenant (the local stack is single-user). Imports PyJWT and ``rag_ingest.core.auth`` only.
Rationale and the endpoints' answers: docs/local-stack.md, "Sign-in: the local identity provider".
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from rag_ingest.core.auth import TENANT_CLAIM, InvalidTenantError, TokenVerifier, validate_tenant_id

OIDC_PATH = "/_local/oidc"
TOKEN_LIFETIME_SECONDS = 3600
# Cognito user names: 1-128 printable characters without whitespace.
_USERNAME = re.compile(r"^[^\s\x00-\x1f\x7f]{1,128}$")
_GROUP = _USERNAME  # Cognito group names: 1-128 characters, no white space
# A namespace for deterministic subjects: the same user and tenant keep one ``sub`` across restarts.
_SUBJECT_NAMESPACE = uuid.UUID("1b0f4c4e-5a8e-4d0b-9d59-2f5b2b7f3a61")


class TokenRequestError(ValueError):
    """The token request is malformed (400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class OidcResponse:
    status: int
    payload: dict[str, Any]


class LocalIdentityProvider:
    """Issues and publishes the keys of local ID tokens for one app client (the audience).

    The audience is the template's user-pool client id as the HTTP API's JWT authorizer resolves
    it locally; it is known only after provisioning, hence :meth:`set_audience`. Until then the
    token endpoint answers 503.
    """

    def __init__(self, issuer: str, *, private_key: rsa.RSAPrivateKey | None = None) -> None:
        self.issuer = issuer.rstrip("/")
        self._key = private_key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = self._key.public_key().public_numbers()
        # The key id is the key's own thumbprint-like digest: stable for a given key.
        self.key_id = uuid.uuid5(_SUBJECT_NAMESPACE, f"{numbers.n:x}").hex
        public = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        key = {
            "kty": public["kty"],
            "alg": "RS256",
            "use": "sig",
            "kid": self.key_id,
            "n": public["n"],
            "e": public["e"],
        }
        self._jwks = {"keys": [key]}
        self._audience: str | None = None
        self._lock = threading.Lock()

    # -- configuration ------------------------------------------------------------------------

    def set_audience(self, audience: str) -> None:
        with self._lock:
            self._audience = audience

    @property
    def audience(self) -> str | None:
        return self._audience

    def jwks(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._jwks))  # a copy: callers may not change the published set

    def verifier(self, audience: str | None = None) -> TokenVerifier:
        """The verifier the JWT authorizer stand-in and the live channel use (same checks as AWS)."""
        target = audience or self._audience
        if target is None:
            raise RuntimeError("the identity provider has no audience yet (the stack is provisioning)")
        return TokenVerifier(issuer=self.issuer, audience=target, jwks=self.jwks)

    def openid_configuration(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/jwks.json",
            "token_endpoint": f"{self.issuer}/token",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "claims_supported": [
                "iss",
                "aud",
                "exp",
                "iat",
                "auth_time",
                "sub",
                "token_use",
                "email",
                "email_verified",
                "cognito:username",
                "cognito:groups",
                TENANT_CLAIM,
            ],
            # Not an OpenID Connect flow: a dev-only endpoint that signs in without a password.
            "grant_types_supported": [],
        }

    # -- tokens -------------------------------------------------------------------------------

    def issue(
        self,
        username: object,
        tenant_id: object,
        *,
        lifetime_seconds: int = TOKEN_LIFETIME_SECONDS,
        groups: object = None,
    ) -> str:
        """An ID token for ``username`` in ``tenant_id`` (validated), as Cognito shapes it; ``groups``
        (a list of group names) becomes ``cognito:groups``, which Cognito leaves out when there are none."""
        group_names = _groups(groups)
        if not isinstance(username, str) or not _USERNAME.fullmatch(username):
            raise TokenRequestError("INVALID_USERNAME", "username must be 1-128 printable characters, no spaces")
        try:
            tenant = validate_tenant_id(tenant_id)
        except InvalidTenantError as exc:
            raise TokenRequestError("INVALID_TENANT", str(exc)) from exc
        audience = self._audience
        if audience is None:
            raise RuntimeError("the identity provider has no audience yet (the stack is provisioning)")
        now = int(time.time())
        claims = {
            "sub": str(uuid.uuid5(_SUBJECT_NAMESPACE, f"{tenant}/{username}")),
            "email_verified": True,
            "iss": self.issuer,
            "cognito:username": username,
            "origin_jti": str(uuid.uuid4()),
            "aud": audience,
            "event_id": str(uuid.uuid4()),
            "token_use": "id",
            "auth_time": now,
            "exp": now + lifetime_seconds,
            "iat": now,
            "jti": str(uuid.uuid4()),
            "email": f"{username}@example.com" if "@" not in username else username,
            TENANT_CLAIM: tenant,
        }
        if group_names:
            claims["cognito:groups"] = group_names
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self.key_id})

    # -- the token endpoint -------------------------------------------------------------------

    def token_response(self, body: bytes) -> OidcResponse:
        """``POST /_local/oidc/token``: a token for the JSON body's user and tenant, or a 400/503."""
        try:
            request = json.loads(body or b"null")
        except ValueError:
            return OidcResponse(HTTPStatus.BAD_REQUEST, _error("INVALID_REQUEST", "the body must be JSON"))
        if not isinstance(request, dict):
            return OidcResponse(
                HTTPStatus.BAD_REQUEST, _error("INVALID_REQUEST", 'expected {"username": ..., "tenant_id": ...}')
            )
        lifetime = request.get("expires_in", TOKEN_LIFETIME_SECONDS)
        # Shorter lifetimes let tests see a token expire; never longer than Cognito's default hour.
        if isinstance(lifetime, bool) or not isinstance(lifetime, int) or not 1 <= lifetime <= TOKEN_LIFETIME_SECONDS:
            return OidcResponse(
                HTTPStatus.BAD_REQUEST,
                _error("INVALID_REQUEST", f"expires_in must be an integer in [1, {TOKEN_LIFETIME_SECONDS}]"),
            )
        if self._audience is None:
            return OidcResponse(HTTPStatus.SERVICE_UNAVAILABLE, _error("NOT_READY", "the local stack is starting"))
        try:
            token = self.issue(
                request.get("username"),
                request.get("tenant_id"),
                lifetime_seconds=lifetime,
                groups=request.get("groups"),
            )
        except TokenRequestError as exc:
            return OidcResponse(HTTPStatus.BAD_REQUEST, _error(exc.code, str(exc)))
        return OidcResponse(HTTPStatus.OK, {"id_token": token, "token_type": "Bearer", "expires_in": lifetime})


def _groups(value: object) -> list[str]:
    """A token request's ``groups``: Cognito group names (1-128 characters, no white space), at most 100."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 100:
        raise TokenRequestError("INVALID_GROUPS", "groups must be a list of at most 100 group names")
    for name in value:
        if not isinstance(name, str) or not _GROUP.fullmatch(name):
            raise TokenRequestError("INVALID_GROUPS", "a group name is 1-128 printable characters, no spaces")
    return list(dict.fromkeys(value))


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
