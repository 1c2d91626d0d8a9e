"""The token issuer's public keys (JWKS), fetched over HTTPS and cached for the process.

The WebSocket authorizer verifies Cognito ID tokens against
``https://cognito-idp.<region>.amazonaws.com/<poolId>/.well-known/jwks.json``. The key set is
fetched once per cold start and kept; it is fetched again after ``max_age_seconds`` so a key
rotation reaches warm functions too.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from rag_ingest.core.auth import InvalidTokenError


def jwks_url_for(issuer: str) -> str:
    """Cognito (and any OpenID issuer that follows its layout) publishes keys here."""
    return issuer.rstrip("/") + "/.well-known/jwks.json"


def _fetch_json(url: str, timeout_seconds: float) -> Mapping[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
        body = json.loads(response.read())
    if not isinstance(body, dict):
        raise ValueError("the key set is not a JSON object")
    return body


class CachedJwks:
    """A callable for :class:`rag_ingest.core.auth.TokenVerifier`'s ``jwks``."""

    def __init__(
        self,
        url: str,
        *,
        max_age_seconds: float = 3600,
        timeout_seconds: float = 5,
        fetch: Callable[[str, float], Mapping[str, Any]] = _fetch_json,
        clock: Callable[[], float] = time.monotonic,
        allow_http: bool = False,
    ) -> None:
        if not (url.startswith("https://") or (allow_http and url.startswith("http://"))):
            raise ValueError(f"the JWKS URL must be https: {url}")
        self.url = url
        self._max_age = max_age_seconds
        self._timeout = timeout_seconds
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: Mapping[str, Any] | None = None
        self._fetched_at = 0.0

    def __call__(self) -> Mapping[str, Any]:
        with self._lock:
            if self._keys is None or self._clock() - self._fetched_at >= self._max_age:
                try:
                    keys = self._fetch(self.url, self._timeout)
                except (OSError, ValueError) as exc:
                    if self._keys is not None:  # keep serving the last good set
                        return self._keys
                    raise InvalidTokenError(f"the issuer's key set could not be fetched: {exc}") from exc
                self._keys = keys
                self._fetched_at = self._clock()
            return self._keys
