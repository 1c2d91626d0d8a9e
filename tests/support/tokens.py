"""Tokens the local identity provider would never issue, signed with the key a test gave the stack.

A test writes an RSA key to a file and starts the local stack with ``LOCAL_OIDC_SIGNING_KEY``
pointing at it: tokens signed here then carry the provider's real signature, so a refusal for a
wrong issuer, audience or expiry is that check's doing, not a signature failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_key(key: rsa.RSAPrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class TokenForge:
    """Signs ID tokens for the stack at ``api_url`` with ``key`` (the stack's own signing key)."""

    api_url: str
    key: rsa.RSAPrivateKey

    @property
    def issuer(self) -> str:
        return f"{self.api_url}/_local/oidc"

    def discovery(self) -> tuple[str, str]:
        """The stack's key id and audience (from its JWKS and a token it issued)."""
        [jwk] = requests.get(f"{self.issuer}/jwks.json", timeout=10).json()["keys"]
        issued = requests.post(
            f"{self.issuer}/token", json={"username": "probe", "tenant_id": "probe"}, timeout=10
        ).json()["id_token"]
        return str(jwk["kid"]), str(jwt.decode(issued, options={"verify_signature": False})["aud"])

    def token(
        self, *, key: rsa.RSAPrivateKey | None = None, algorithm: str = "RS256", lifetime: int = 600, **claims: Any
    ) -> str:
        """A token with the provider's claims, changed by ``claims`` (a value of None drops the claim)."""
        kid, audience = self.discovery()
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience,
            "iat": now,
            "exp": now + lifetime,
            "sub": "00000000-0000-0000-0000-000000000001",
            "token_use": "id",
            "email": "forged@example.com",
            "cognito:username": "forged",
            "custom:tenant_id": "forged",
        }
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        signing_key: Any = key or self.key
        if algorithm == "HS256":
            signing_key = b"a-shared-secret-that-is-long-enough-for-hs256"
        return jwt.encode(body, signing_key, algorithm=algorithm, headers={"kid": kid})


def bad_tokens(forge: TokenForge) -> dict[str, str]:
    """Every kind of token the JWT authorizer refuses, by what is wrong with it."""
    return {
        "bad signature": forge.token(key=new_key()),
        "expired": forge.token(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
        "wrong issuer": forge.token(iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_other"),
        "wrong audience": forge.token(aud="another-app-client"),
        "HS256": forge.token(algorithm="HS256"),
        "access token": forge.token(token_use="access"),
        "not a JWT": "not-a-jwt",
    }
