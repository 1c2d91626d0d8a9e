"""The CLI's ID tokens: the 0600 cache of token sets per target, their freshness, what a token says
of its user (read, not verified: the API verifies it), and the source a command takes its token from.

Tokens are cached in ``$XDG_CONFIG_HOME/rag-ingest/tokens.json``, a file only its owner can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from rag_ingest_client.cli.errors import CliError

# A token this close to its expiry is renewed before use, so it does not expire in flight.
EXPIRY_MARGIN_SECONDS = 60


def config_home() -> Path:
    """``$XDG_CONFIG_HOME/rag-ingest`` (``~/.config/rag-ingest`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rag-ingest"


def unverified_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified: only for display and expiry (the API verifies it)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise CliError(f"the identity provider returned a malformed token ({exc})") from None
    return dict(claims)


@dataclass
class TokenCache:
    """One JSON file of token sets keyed by target (``local:<api url>``, ``stack:<name>``)."""

    path: Path

    @classmethod
    def default(cls) -> TokenCache:
        return cls(config_home() / "tokens.json")

    def load(self, key: str) -> dict[str, Any] | None:
        entry = self._read().get(key)
        return dict(entry) if isinstance(entry, dict) else None

    def save(self, key: str, entry: dict[str, Any]) -> None:
        entries = self._read()
        entries[key] = entry
        self._write(entries)

    def forget(self, key: str) -> None:
        entries = self._read()
        if entries.pop(key, None) is not None:
            self._write(entries)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, entries: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written to a 0600 temporary file in the same folder, then renamed: never readable by others,
        # never half written.
        descriptor, temporary = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            with os.fdopen(descriptor, "w") as stream:
                json.dump(entries, stream, indent=2)
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def is_fresh(entry: dict[str, Any] | None, now: float | None = None) -> bool:
    if not entry or not entry.get("id_token"):
        return False
    return float(entry.get("expires_at", 0)) - EXPIRY_MARGIN_SECONDS > (now if now is not None else time.time())


def token_entry(answer: dict[str, Any], previous_refresh_token: str | None = None) -> dict[str, Any]:
    """A cache entry from a token endpoint's answer (a refresh answer carries no new refresh token)."""
    id_token = answer.get("id_token")
    if not isinstance(id_token, str):
        raise CliError("the identity provider answered without an id_token")
    claims = unverified_claims(id_token)
    expires_at = claims.get("exp") or time.time() + float(answer.get("expires_in", 3600))
    return {
        "id_token": id_token,
        "refresh_token": answer.get("refresh_token") or previous_refresh_token,
        "expires_at": float(expires_at),
        "username": claims.get("cognito:username") or claims.get("email") or claims.get("sub"),
        "tenant_id": claims.get("custom:tenant_id"),
        "groups": token_groups(claims),
    }


def token_groups(claims: dict[str, Any]) -> list[str]:
    """The token's ``cognito:groups``: a JSON array in Cognito's and the local issuer's ID tokens."""
    value = claims.get("cognito:groups")
    names = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return sorted({name.strip() for name in names if isinstance(name, str) and name.strip()})


class TokenSource:
    """Gives the ID token to send; after a 401, ``invalidate()`` makes the next :meth:`token` a new one."""

    def token(self) -> str:
        raise NotImplementedError

    def invalidate(self) -> bool:
        """Forget the refused token; True when the next :meth:`token` may differ (``http.TokenSource``)."""
        raise NotImplementedError

    def forget(self) -> None:
        """Sign out: drop what is cached."""
