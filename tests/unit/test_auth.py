"""ID-token verification as the JWT authorizer does it, and tenant validation."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from rag_ingest.core.auth import (
    InvalidTenantError,
    InvalidTokenError,
    TokenVerifier,
    bearer_token,
    tenant_of,
    validate_tenant_id,
)

pytestmark = pytest.mark.unit

ISSUER = "https://issuer.example/pool"
AUDIENCE = "client-123"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY = _key()
OTHER_KEY = _key()


def _jwks(key: rsa.RSAPrivateKey, kid: str = "k1") -> dict[str, Any]:
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {"keys": [{**jwk, "kid": kid, "alg": "RS256", "use": "sig"}]}


def _token(key: rsa.RSAPrivateKey = KEY, kid: str = "k1", **overrides: Any) -> str:
    """A signed ID token; an override of None drops that claim."""
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 600,
        "sub": "u1",
        "token_use": "id",
        "custom:tenant_id": "acme",
    }
    claims.update(overrides)
    claims = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


VERIFIER = TokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=lambda: _jwks(KEY))


def test_valid_token_yields_claims_and_tenant() -> None:
    claims = VERIFIER.verify(_token())
    assert claims["sub"] == "u1"
    assert tenant_of(claims) == "acme"


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(_token(key=OTHER_KEY), id="bad-signature"),
        pytest.param(_token(kid="unknown"), id="unknown-kid"),
        pytest.param(_token(exp=int(time.time()) - 5), id="expired"),
        pytest.param(_token(iss="https://evil.example"), id="wrong-issuer"),
        pytest.param(_token(aud="other-client"), id="wrong-audience"),
        pytest.param(_token(token_use="access"), id="access-token"),
        pytest.param(_token(exp=None), id="no-expiry"),
        pytest.param(jwt.encode({"iss": ISSUER, "aud": AUDIENCE}, "secret", algorithm="HS256"), id="hs256"),
        pytest.param("not.a.jwt", id="garbage"),
        pytest.param("", id="empty"),
    ],
)
def test_invalid_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidTokenError):
        VERIFIER.verify(token)


@pytest.mark.parametrize("tenant", ["acme", "A_b-9", "x" * 64])
def test_valid_tenants(tenant: str) -> None:
    assert validate_tenant_id(tenant) == tenant


@pytest.mark.parametrize("tenant", ["", "x" * 65, "a/b", "../x", "a b", "ténant", None, 7, ["a"]])
def test_invalid_tenants(tenant: object) -> None:
    with pytest.raises(InvalidTenantError):
        validate_tenant_id(tenant)


def test_token_without_tenant_claim_is_a_tenant_error() -> None:
    no_tenant: dict[str, Any] = {"custom:tenant_id": None}
    claims = VERIFIER.verify(_token(**no_tenant))
    with pytest.raises(InvalidTenantError):
        tenant_of(claims)


@pytest.mark.parametrize("header", [None, "", "Basic abc", "Bearer", "Bearer   "])
def test_bearer_header_without_token(header: str | None) -> None:
    with pytest.raises(InvalidTokenError):
        bearer_token(header)


def test_bearer_header() -> None:
    assert bearer_token("bearer abc.def.ghi") == "abc.def.ghi"
