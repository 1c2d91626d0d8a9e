"""Getting and keeping ID tokens for the CLI.

- Local stack: the local identity provider's dev-only ``POST /_local/oidc/token`` (any user, any tenant).
- Deployed stack: Cognito's managed login, authorization code + PKCE (RFC 7636) in the browser with a
  loopback redirect (``http://localhost:8765/callback``), then the refresh token at the token endpoint.

Tokens are cached in ``$XDG_CONFIG_HOME/rag-ingest/tokens.json``, a file only its owner can read (0600).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
import secrets
import tempfile
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.transport import CliError, HttpError, config_home, request_json

REDIRECT_PORT = 8765
REDIRECT_PATH = "/callback"
SCOPES = ("openid", "email", "profile")
# A token this close to its expiry is renewed before use, so it does not expire in flight.
EXPIRY_MARGIN_SECONDS = 60


# ---------------------------------------------------------------- PKCE (RFC 7636)
def pkce_verifier() -> str:
    """43 characters of base64url from 32 random bytes (the RFC's recommended verifier)."""
    return _b64url(secrets.token_bytes(32))


def pkce_challenge(verifier: str) -> str:
    """``S256``: BASE64URL(SHA256(ASCII(verifier))) without padding."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unverified_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified: only for display and expiry (the API verifies it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError) as exc:
        raise CliError(f"the identity provider returned a malformed token ({exc})") from None
    return claims if isinstance(claims, dict) else {}


# ---------------------------------------------------------------- the cache
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


# ---------------------------------------------------------------- token sources
class TokenSource:
    """Gives the ID token to send; ``invalidate()`` after a 401 makes the next call get a new one."""

    def token(self) -> str:
        raise NotImplementedError

    def invalidate(self) -> None:
        raise NotImplementedError

    def forget(self) -> None:
        """Sign out: drop what is cached."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}


@dataclass
class LocalSignIn(TokenSource):
    """The local identity provider: a token for any user and tenant, cached until it expires."""

    api_url: str
    username: str
    tenant_id: str
    cache: TokenCache
    #: The token's cognito:groups (e.g. the tenant-admin group), as the local issuer signs them.
    groups: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"local:{self.api_url}"

    @property
    def token_url(self) -> str:
        return f"{self.api_url}/_local/oidc/token"

    def token(self) -> str:
        entry = self.cache.load(self.key)
        if (
            is_fresh(entry)
            and entry
            and (entry.get("username"), entry.get("tenant_id"), sorted(entry.get("groups") or []))
            == (
                self.username,
                self.tenant_id,
                sorted(self.groups),
            )
        ):
            return str(entry["id_token"])
        return self.sign_in()

    def sign_in(self) -> str:
        try:
            _, answer = request_json("POST", self.token_url, body=self._token_request())
        except HttpError as exc:
            if exc.status == 400:
                raise CliError(f"the local identity provider refused the sign-in: {exc.message}") from None
            if exc.status == 404:
                raise CliError(
                    f"the local stack at {self.api_url} has no identity provider ({self.token_url} not found): "
                    "restart it from this checkout (`make stack-down stack-up`)"
                ) from None
            raise
        entry = token_entry(answer if isinstance(answer, dict) else {})
        self.cache.save(self.key, entry)
        return str(entry["id_token"])

    def _token_request(self) -> dict[str, Any]:
        body: dict[str, Any] = {"username": self.username, "tenant_id": self.tenant_id}
        if self.groups:
            body["groups"] = list(self.groups)
        return body

    def invalidate(self) -> None:
        # The local issuer makes a new key at each start: a cached token of a previous run is refused.
        self.cache.forget(self.key)

    def forget(self) -> None:
        self.cache.forget(self.key)


@dataclass(frozen=True)
class CognitoClient:
    """A user pool's managed login (hosted UI) and its public app client (no secret: PKCE)."""

    domain: str  # https://<prefix>.auth.<region>.amazoncognito.com
    client_id: str

    @property
    def token_url(self) -> str:
        return f"{self.domain}/oauth2/token"

    def authorize_url(self, *, redirect_uri: str, state: str, challenge: str) -> str:
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "scope": " ".join(SCOPES),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return f"{self.domain}/oauth2/authorize?{urllib.parse.urlencode(query)}"

    def exchange_code(self, code: str, *, redirect_uri: str, verifier: str) -> dict[str, Any]:
        _, answer = request_json(
            "POST",
            self.token_url,
            form={
                "grant_type": "authorization_code",
                "client_id": self.client_id,
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            },
        )
        return token_entry(answer if isinstance(answer, dict) else {})

    def refresh(self, refresh_token: str) -> dict[str, Any]:
        _, answer = request_json(
            "POST",
            self.token_url,
            form={"grant_type": "refresh_token", "client_id": self.client_id, "refresh_token": refresh_token},
        )
        return token_entry(answer if isinstance(answer, dict) else {}, previous_refresh_token=refresh_token)


def cognito_domain(value: str, region: str | None) -> str:
    """The ``UserPoolDomain`` output as a URL: a URL, a host name, or a bare domain prefix."""
    value = value.strip().rstrip("/")
    if value.startswith(("https://", "http://")):
        return value
    if "." in value:
        return f"https://{value}"
    if not region:
        raise CliError(f"cannot build the sign-in URL of domain prefix {value!r} without a region (--region)")
    return f"https://{value}.auth.{region}.amazoncognito.com"


@dataclass
class CognitoSignIn(TokenSource):
    """The cached Cognito tokens of one deployed stack, renewed with the refresh token."""

    stack_name: str
    client: CognitoClient
    cache: TokenCache

    @property
    def key(self) -> str:
        return f"stack:{self.stack_name}"

    def token(self) -> str:
        entry = self.cache.load(self.key)
        if is_fresh(entry) and entry:
            return str(entry["id_token"])
        refresh_token = (entry or {}).get("refresh_token")
        if not refresh_token:
            raise CliError(
                f"not signed in to stack {self.stack_name}: run `rag-ingest --stack {self.stack_name} login`"
            )
        try:
            renewed = self.client.refresh(str(refresh_token))
        except HttpError as exc:
            if exc.status in (400, 401):  # invalid_grant: the refresh token expired or was revoked
                self.cache.forget(self.key)
                raise CliError(
                    f"the sign-in to stack {self.stack_name} expired ({exc.message}): "
                    f"run `rag-ingest --stack {self.stack_name} login`"
                ) from None
            raise
        self.cache.save(self.key, renewed)
        return str(renewed["id_token"])

    def invalidate(self) -> None:
        entry = self.cache.load(self.key)
        if entry:
            entry["expires_at"] = 0  # keep the refresh token: the next call renews
            self.cache.save(self.key, entry)

    def forget(self) -> None:
        self.cache.forget(self.key)

    def login(
        self,
        *,
        open_browser: Callable[[str], Any] = webbrowser.open,
        announce: Callable[[str], None] = print,
        port: int = REDIRECT_PORT,
        timeout_seconds: float = 300.0,
    ) -> dict[str, Any]:
        entry = browser_login(
            self.client, open_browser=open_browser, announce=announce, port=port, timeout_seconds=timeout_seconds
        )
        self.cache.save(self.key, entry)
        return entry


# ---------------------------------------------------------------- the browser flow
class _CallbackServer(HTTPServer):
    result: dict[str, str] | None = None


class _CallbackHandler(BaseHTTPRequestHandler):
    server: _CallbackServer

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path != REDIRECT_PATH:
            self.send_error(404)
            return
        params = {key: values[0] for key, values in urllib.parse.parse_qs(url.query).items()}
        self.server.result = params
        failed = "error" in params or "code" not in params
        message = (
            f"Sign-in failed: {params.get('error_description') or params.get('error') or 'no code'}"
            if failed
            else "Signed in to rag-ingest. You can close this tab and return to the terminal."
        )
        page = f"<!doctype html><title>rag-ingest</title><p>{html.escape(message)}</p>".encode()
        self.send_response(400 if failed else 200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the flow's own lines, not an access log


def browser_login(
    client: CognitoClient,
    *,
    open_browser: Callable[[str], Any] = webbrowser.open,
    announce: Callable[[str], None] = print,
    port: int = REDIRECT_PORT,
    timeout_seconds: float = 300.0,
) -> dict[str, Any]:
    """Authorization code + PKCE: open the managed login, receive the code on the loopback
    redirect, exchange it (with the verifier) for tokens."""
    verifier, state = pkce_verifier(), secrets.token_urlsafe(24)
    redirect_uri = f"http://localhost:{port}{REDIRECT_PATH}"
    try:
        server = _CallbackServer(("127.0.0.1", port), _CallbackHandler)
    except OSError as exc:
        raise CliError(f"cannot listen on {redirect_uri} for the sign-in redirect: {exc}") from None
    url = client.authorize_url(redirect_uri=redirect_uri, state=state, challenge=pkce_challenge(verifier))
    server.timeout = 0.5
    with server:
        announce(f"Opening the sign-in page (if no browser opens, visit this URL):\n{url}")
        threading.Thread(target=open_browser, args=(url,), daemon=True).start()
        deadline = time.monotonic() + timeout_seconds
        while server.result is None:
            if time.monotonic() > deadline:
                raise CliError(f"no sign-in within {timeout_seconds:.0f}s")
            server.handle_request()
    result = server.result
    if "error" in result:
        raise CliError(f"sign-in failed: {result.get('error_description') or result['error']}")
    if not secrets.compare_digest(result.get("state", ""), state):
        raise CliError("sign-in failed: the redirect's state does not match (a stale or forged redirect)")
    if "code" not in result:
        raise CliError("sign-in failed: the redirect carries no authorization code")
    return client.exchange_code(result["code"], redirect_uri=redirect_uri, verifier=verifier)
