"""The CLI's sign-in: PKCE per RFC 7636, the 0600 token cache, and the authorization-code flow with a
loopback redirect against a small OAuth server that checks the PKCE pair as Cognito does."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.signin import (
    CognitoClient,
    CognitoSignIn,
    browser_login,
    cognito_domain,
    pkce_challenge,
    pkce_verifier,
)
from rag_ingest_client.cli.tokens import TokenCache, is_fresh, unverified_claims

from tests.support.aws import free_port

pytestmark = pytest.mark.unit


def test_pkce_challenge_matches_the_rfc_7636_appendix_b_vector() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert pkce_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_pkce_verifiers_are_43_unreserved_characters_and_never_repeat() -> None:
    verifiers = {pkce_verifier() for _ in range(200)}
    assert len(verifiers) == 200
    unreserved = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    for verifier in verifiers:
        assert len(verifier) == 43 and set(verifier) <= unreserved  # RFC 7636 §4.1: 43..128 unreserved


def jwt_with(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(claims)}.c2lnbmF0dXJl"


def test_token_cache_is_private_and_survives_rewrites(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "config" / "rag-ingest" / "tokens.json")
    cache.save("stack:A", {"id_token": "a", "expires_at": 1})
    cache.save("local:http://x", {"id_token": "b", "expires_at": 2})
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.path.parent.stat().st_mode) == 0o700
    assert cache.load("stack:A") == {"id_token": "a", "expires_at": 1}
    cache.forget("stack:A")
    assert cache.load("stack:A") is None and cache.load("local:http://x") == {"id_token": "b", "expires_at": 2}
    assert [p.name for p in cache.path.parent.iterdir()] == ["tokens.json"]  # no temporary file left behind
    cache.path.write_text("{not json")
    assert cache.load("local:http://x") is None  # a damaged cache means "signed out", not a crash


def test_freshness_keeps_a_minute_of_margin() -> None:
    now = 1_000_000.0
    assert is_fresh({"id_token": "t", "expires_at": now + 120}, now)
    assert not is_fresh({"id_token": "t", "expires_at": now + 30}, now)
    assert not is_fresh({"expires_at": now + 3600}, now)
    assert not is_fresh(None, now)


def test_unverified_claims_and_malformed_tokens() -> None:
    assert unverified_claims(jwt_with({"custom:tenant_id": "acme"}))["custom:tenant_id"] == "acme"
    with pytest.raises(CliError, match="malformed token"):
        unverified_claims("not-a-jwt")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://p.auth.eu-west-1.amazoncognito.com/", "https://p.auth.eu-west-1.amazoncognito.com"),
        ("p.auth.eu-west-1.amazoncognito.com", "https://p.auth.eu-west-1.amazoncognito.com"),
        ("login.example.com", "https://login.example.com"),
        ("ragingest-1234", "https://ragingest-1234.auth.eu-west-1.amazoncognito.com"),
    ],
)
def test_user_pool_domain_output_forms(value: str, expected: str) -> None:
    assert cognito_domain(value, "eu-west-1") == expected


# ---------------------------------------------------------------- an authorization server
@dataclass
class OAuthServer:
    """Cognito's /oauth2/authorize and /oauth2/token for one public client, with PKCE S256 enforced."""

    client_id: str = "client-123"
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    refresh_tokens: set[str] = field(default_factory=set)
    url: str = ""

    def tokens(self, *, refresh: bool) -> dict[str, Any]:
        claims = {"cognito:username": "ana", "custom:tenant_id": "acme", "exp": int(time.time()) + 3600}
        answer: dict[str, Any] = {"id_token": jwt_with(claims), "access_token": "at", "expires_in": 3600}
        if refresh:
            token = f"rt-{len(self.refresh_tokens)}"
            self.refresh_tokens.add(token)
            answer["refresh_token"] = token
        return answer


@pytest.fixture
def oauth() -> Iterator[OAuthServer]:
    state = OAuthServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            assert url.path == "/oauth2/authorize"
            assert query["response_type"] == "code" and query["client_id"] == state.client_id
            assert query["code_challenge_method"] == "S256" and query["scope"] == "openid email profile"
            code = f"code-{len(state.codes)}"
            state.codes[code] = query
            self.send_response(302)
            redirect = f"{query['redirect_uri']}?{urllib.parse.urlencode({'code': code, 'state': query['state']})}"
            self.send_header("Location", redirect)
            self.end_headers()

        def do_POST(self) -> None:
            form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
            state.token_requests.append(form)
            answer: tuple[int, dict[str, Any]]
            if form["grant_type"] == "authorization_code":
                issued = state.codes.pop(form["code"], None)
                challenge = base64.urlsafe_b64encode(hashlib.sha256(form["code_verifier"].encode()).digest())
                if issued is None or issued["code_challenge"] != challenge.rstrip(b"=").decode():
                    answer = (400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
                elif issued["redirect_uri"] != form["redirect_uri"]:
                    answer = (400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
                else:
                    answer = (200, state.tokens(refresh=True))
            elif form["grant_type"] == "refresh_token" and form["refresh_token"] in state.refresh_tokens:
                answer = (200, state.tokens(refresh=False))
            else:
                answer = (400, {"error": "invalid_grant", "error_description": "Refresh Token has expired"})
            body = json.dumps(answer[1]).encode()
            self.send_response(answer[0])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def browser(url: str) -> None:
    """What a browser does after the user signs in: follow the redirect to the loopback callback."""
    urllib.request.urlopen(url, timeout=10).read()


def test_authorization_code_flow_with_pkce_and_loopback_redirect(oauth: OAuthServer, tmp_path: Path) -> None:
    client = CognitoClient(domain=oauth.url, client_id=oauth.client_id)
    sign_in = CognitoSignIn("Prod", client, TokenCache(tmp_path / "tokens.json"))
    lines: list[str] = []
    entry = sign_in.login(open_browser=browser, announce=lines.append, port=free_port(), timeout_seconds=20)

    assert entry["username"] == "ana" and entry["tenant_id"] == "acme" and entry["refresh_token"] == "rt-0"
    assert oauth.url in lines[0]  # the URL is printed for machines without a browser
    exchange = oauth.token_requests[0]
    assert exchange["grant_type"] == "authorization_code" and "client_secret" not in exchange
    assert exchange["redirect_uri"].startswith("http://localhost:") and exchange["redirect_uri"].endswith("/callback")
    assert sign_in.token() == entry["id_token"]  # cached: no second request
    assert len(oauth.token_requests) == 1


def test_expired_id_token_is_renewed_with_the_refresh_token(oauth: OAuthServer, tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "tokens.json")
    oauth.refresh_tokens.add("rt-kept")
    cache.save("stack:Prod", {"id_token": "old", "refresh_token": "rt-kept", "expires_at": time.time() - 5})
    sign_in = CognitoSignIn("Prod", CognitoClient(oauth.url, oauth.client_id), cache)

    token = sign_in.token()
    assert token != "old" and unverified_claims(token)["custom:tenant_id"] == "acme"
    assert oauth.token_requests[-1] == {
        "grant_type": "refresh_token", "client_id": oauth.client_id, "refresh_token": "rt-kept"
    }  # fmt: skip
    assert cache.load("stack:Prod")["refresh_token"] == "rt-kept"  # type: ignore[index]  # Cognito sends no new one


def test_a_revoked_refresh_token_asks_for_login(oauth: OAuthServer, tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "tokens.json")
    cache.save("stack:Prod", {"id_token": "old", "refresh_token": "revoked", "expires_at": 0})
    sign_in = CognitoSignIn("Prod", CognitoClient(oauth.url, oauth.client_id), cache)
    with pytest.raises(CliError, match=r"expired \(Refresh Token has expired\): run `rag-ingest --stack Prod login`"):
        sign_in.token()
    assert cache.load("stack:Prod") is None
    with pytest.raises(CliError, match="not signed in to stack Prod"):
        sign_in.token()


def test_a_redirect_with_another_state_is_refused(oauth: OAuthServer) -> None:
    port = free_port()

    def forged(url: str) -> None:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/callback?code=stolen&state=other", timeout=10).read()

    client = CognitoClient(oauth.url, oauth.client_id)
    with pytest.raises(CliError, match="state does not match"):
        browser_login(client, open_browser=forged, announce=lambda _: None, port=port, timeout_seconds=20)
    assert oauth.token_requests == []  # the forged code is never exchanged


def test_an_error_redirect_is_reported(oauth: OAuthServer) -> None:
    port = free_port()

    def denied(url: str) -> None:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/callback?error=access_denied", timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 400

    with pytest.raises(CliError, match="sign-in failed: access_denied"):
        browser_login(
            CognitoClient(oauth.url, oauth.client_id), open_browser=denied, announce=lambda _: None, port=port
        )
