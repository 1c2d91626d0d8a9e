"""Signing the CLI in, and renewing its tokens (kept by ``rag_ingest_client.cli.tokens``).

- Local stack: the local identity provider's dev-only ``POST /_local/oidc/token`` (any user, any tenant).
- Deployed stack: Cognito's managed login, authorization code + PKCE (RFC 7636) in the browser with a
  loopback redirect (``http://localhost:8765/callback``), then the refresh token at the token endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import html
import secrets
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.tokens import TokenCache, TokenSource, is_fresh, token_entry
from rag_ingest_client.http import ApiError, post_form, post_json

REDIRECT_PORT = 8765
REDIRECT_PATH = "/callback"
SCOPES = ("openid", "email", "profile")


# ---------------------------------------------------------------- PKCE (RFC 7636)
def pkce_verifier() -> str:
    """43 characters of base64url from 32 random bytes (the RFC's recommended verifier)."""
    return _b64url(secrets.token_bytes(32))


def pkce_challenge(verifier: str) -> str:
    """``S256``: BASE64URL(SHA256(ASCII(verifier))) without padding."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


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
            answer = post_json(self.token_url, self._token_request())
        except ApiError as exc:
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

    def invalidate(self) -> bool:
        # The local issuer makes a new key at each start: a cached token of a previous run is refused.
        self.cache.forget(self.key)
        return True

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
        answer = post_form(
            self.token_url,
            {
                "grant_type": "authorization_code",
                "client_id": self.client_id,
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            },
        )
        return token_entry(answer if isinstance(answer, dict) else {})

    def refresh(self, refresh_token: str) -> dict[str, Any]:
        answer = post_form(
            self.token_url,
            {"grant_type": "refresh_token", "client_id": self.client_id, "refresh_token": refresh_token},
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
        except ApiError as exc:
            if exc.status in (400, 401):  # invalid_grant: the refresh token expired or was revoked
                self.cache.forget(self.key)
                raise CliError(
                    f"the sign-in to stack {self.stack_name} expired ({exc.message}): "
                    f"run `rag-ingest --stack {self.stack_name} login`"
                ) from None
            raise
        self.cache.save(self.key, renewed)
        return str(renewed["id_token"])

    def invalidate(self) -> bool:
        entry = self.cache.load(self.key)
        if entry:
            entry["expires_at"] = 0  # keep the refresh token: the next call renews
            self.cache.save(self.key, entry)
        return True

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
