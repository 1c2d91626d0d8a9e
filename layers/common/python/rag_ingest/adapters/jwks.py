"""The token issuer's public keys (JWKS) for :class:`rag_ingest.core.auth.TokenVerifier`.

PyJWT's ``PyJWKClient`` fetches ``<issuer>/.well-known/jwks.json`` (https only) and keeps the parsed
key set for ``max_age_seconds``, so a key rotation reaches warm functions too; a refresh that fails
serves the last good set, and a first fetch that fails is an :class:`InvalidTokenError` (a 401).
"""

from __future__ import annotations

import threading

import jwt

from rag_ingest.core.auth import InvalidTokenError


def jwks_url_for(issuer: str) -> str:
    """Cognito (and any OpenID issuer that follows its layout) publishes keys here."""
    return issuer.rstrip("/") + "/.well-known/jwks.json"


class CachedJwks:
    """A callable for :class:`rag_ingest.core.auth.TokenVerifier`'s ``jwks``: the issuer's key set."""

    def __init__(
        self,
        url: str,
        *,
        max_age_seconds: float = 3600,
        timeout_seconds: float = 5,
        allow_http: bool = False,
        client: jwt.PyJWKClient | None = None,
    ) -> None:
        if not (url.startswith("https://") or (allow_http and url.startswith("http://"))):
            raise ValueError(f"the JWKS URL must be https: {url}")
        self.url = url
        self._client = client or jwt.PyJWKClient(
            url, cache_jwk_set=True, lifespan=max_age_seconds, timeout=timeout_seconds
        )
        self._lock = threading.Lock()
        self._last_good: jwt.PyJWKSet | None = None

    def __call__(self) -> jwt.PyJWKSet:
        with self._lock:
            try:
                key_set = self._client.get_jwk_set()
            except (jwt.PyJWTError, OSError, ValueError) as exc:
                if self._last_good is not None:  # keep serving the last good set
                    return self._last_good
                raise InvalidTokenError(f"the issuer's key set could not be fetched: {exc}") from exc
            self._last_good = key_set
            return key_set
