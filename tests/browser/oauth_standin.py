"""A stand-in for Cognito's managed login (OAuth 2.0 authorization code + PKCE), for the page's
sign-in code. Nothing here emulates Cognito's hosted UI, so this implements just what the page
uses, strictly: ``/oauth2/authorize`` (response_type=code, S256 challenge required), ``/oauth2/token``
(the verifier must hash to the challenge, one use per code, exact redirect_uri and client_id) and
``/logout``. It signs in one fixed user without a form and records every request for assertions.

It also serves the page (``web/``) with a Cognito ``config.json``, and the few API answers the
tests set (``documents``), and a storage endpoint that refuses uploads with S3's XML errors, as S3
does when a presigned POST's policy fails (moto does not enforce POST policies)."""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from simple_websocket import Server

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
CLIENT_ID = "standin-client-id"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json"}


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@dataclass
class Grant:
    challenge: str
    redirect_uri: str


@dataclass
class CognitoStandIn:
    username: str = "frank"
    tenant_id: str = "acme"
    grants: dict[str, Grant] = field(default_factory=dict)
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    logout_requests: list[dict[str, str]] = field(default_factory=list)
    #: Documents the stand-in API answers with (GET /documents, GET /documents/{id}), by id.
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What the storage endpoint answers an upload with: (status, S3 error code, message).
    storage_refusal: tuple[int, str, str] = (403, "AccessDenied", "Invalid according to Policy")
    document_gets: int = 0
    #: The WebSocket channel: answer upgrades on /live (else refuse them), what to push, who connected.
    live_enabled: bool = False
    live_outbox: queue.Queue[str | None] = field(default_factory=queue.Queue)
    live_tokens: list[str] = field(default_factory=list)
    issued_tokens: list[str] = field(default_factory=list)
    idp: ThreadingHTTPServer | None = None
    site: ThreadingHTTPServer | None = None

    @property
    def domain(self) -> str:
        assert self.idp is not None
        return f"http://127.0.0.1:{self.idp.server_address[1]}"

    @property
    def page_url(self) -> str:
        assert self.site is not None
        return f"http://127.0.0.1:{self.site.server_address[1]}/"

    def config(self) -> dict[str, Any]:
        return {
            "apiUrl": self.page_url.rstrip("/"),
            "maxUploadBytes": 52428800,
            # Upgrades are refused unless live_enabled: then the page must fall back to polling.
            "live": {"kind": "websocket", "url": self.page_url.replace("http", "ws") + "live"},
            "auth": {
                "kind": "cognito",
                "domain": self.domain,
                "clientId": CLIENT_ID,
                "redirectUri": self.page_url,
                "logoutUri": self.page_url,
                "scopes": ["openid", "email", "profile"],
            },
        }

    def id_token(self) -> str:
        now = int(time.time())
        claims = {
            "sub": "8c1f-standin",
            "iss": f"{self.domain}/pool",
            "aud": CLIENT_ID,
            "token_use": "id",
            "iat": now,
            "exp": now + 3600,
            "email": f"{self.username}@example.com",
            "cognito:username": self.username,
            "custom:tenant_id": self.tenant_id,
        }
        token = jwt.encode(claims, secrets.token_bytes(32), algorithm="HS256")
        self.issued_tokens.append(token)
        return token

    def push(self, message: dict[str, Any]) -> None:
        """Send a message to the connected page (as the pusher Lambda does through API Gateway)."""
        self.live_outbox.put(json.dumps(message))

    def drop_connection(self) -> None:
        """Close the connection from the server side (as API Gateway does after 2 h)."""
        self.live_outbox.put(None)

    def serve_websocket(self, handler: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        """The WebSocket API as the page meets it (simple-websocket does the protocol): the upgrade,
        text messages, and a close from the server's side."""
        token = query.get("token", "")
        if not self.live_enabled or token not in self.issued_tokens:
            handler.send_response(401)  # as the REQUEST authorizer refuses a connection
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        self.live_tokens.append(token)
        # simple-websocket reads the upgrade from a WSGI environ: the request's headers and socket.
        environ = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in handler.headers.items()}
        socket = Server.accept({**environ, "werkzeug.socket": handler.connection})
        handler.close_connection = True
        while True:
            message = self.live_outbox.get()
            if message is None:
                socket.close()
                return
            socket.send(message)

    # -- servers ----------------------------------------------------------------------------------

    def start(self) -> None:
        self.idp = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, self._idp))
        self.site = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, self._site))
        for server in (self.idp, self.site):
            server.daemon_threads = True  # an open WebSocket must not hold up the shutdown
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.live_outbox.put(None)
        for server in (self.idp, self.site):
            if server is not None:
                server.shutdown()
                server.server_close()

    def _idp(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "OPTIONS":  # the token endpoint is called cross-origin by the page
            return 204, {}, b""
        if path == "/oauth2/authorize" and method == "GET":
            self.authorize_requests.append(query)
            if (
                query.get("response_type") != "code"
                or query.get("client_id") != CLIENT_ID
                or query.get("code_challenge_method") != "S256"
                or not query.get("code_challenge")
                or not query.get("state")
            ):
                return 400, {"Content-Type": "text/plain"}, b"invalid_request"
            code = secrets.token_urlsafe(16)
            self.grants[code] = Grant(query["code_challenge"], query["redirect_uri"])
            location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
            return 302, {"Location": location}, b""
        if path == "/oauth2/token" and method == "POST":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            grant = self.grants.pop(form.get("code", ""), None)  # one use per code
            verified = grant is not None and _s256(form.get("code_verifier", "")) == grant.challenge
            valid = (
                verified
                and grant is not None
                and form.get("grant_type") == "authorization_code"
                and form.get("client_id") == CLIENT_ID
                and form.get("redirect_uri") == grant.redirect_uri
            )
            self.token_requests.append({**form, "valid": valid})
            if not valid:
                return 400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}'
            answer = {"id_token": self.id_token(), "access_token": "a", "expires_in": 3600, "token_type": "Bearer"}
            return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()
        if path == "/logout" and method == "GET":
            self.logout_requests.append(query)
            return 302, {"Location": query.get("logout_uri", "/")}, b""
        return 404, {}, b""

    def content_security_policy(self) -> str:
        """As strict as the CloudFront response headers policy: no inline code, connections only to
        the page's own origin (API, storage and live channel here), and the sign-in domain."""
        live = self.page_url.replace("http", "ws").rstrip("/")
        return "; ".join(
            [
                "default-src 'none'",
                "script-src 'self'",
                "style-src 'self'",
                "img-src 'self' data:",
                f"connect-src 'self' {self.domain} {live}",
                "form-action 'self'",
                "frame-ancestors 'none'",
                "base-uri 'self'",
            ]
        )

    def _site(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path in ("/", "/index.html"):
            page = (WEB_DIR / "index.html").read_bytes()
            return 200, {"Content-Type": "text/html", "Content-Security-Policy": self.content_security_policy()}, page
        if path == "/config.json":
            return 200, {"Content-Type": "application/json"}, json.dumps(self.config()).encode()
        json_type = {"Content-Type": "application/json"}
        if path == "/documents" and method == "GET":
            items = sorted(self.documents.values(), key=lambda d: d["created_at"], reverse=True)
            return 200, json_type, json.dumps({"items": items, "next_cursor": None}).encode()
        if path.startswith("/documents/") and method == "GET":
            self.document_gets += 1
            document = self.documents.get(path.rsplit("/", 1)[-1])
            if document is None:
                return 404, json_type, b'{"error": {"code": "NOT_FOUND", "message": "no such document"}}'
            return 200, json_type, json.dumps(document).encode()
        if path == "/documents" and method == "POST":
            ticket = {
                "document_id": "01STANDIN",
                "status": "AWAITING_UPLOAD",
                "upload": {"url": f"{self.page_url}storage", "fields": {"key": "raw/acme/01STANDIN/x.pdf"}},
                "expires_at": int(time.time()) + 900,
                "max_bytes": 52428800,
            }
            return 201, json_type, json.dumps(ticket).encode()
        if path == "/storage" and method == "POST":
            status, code, message = self.storage_refusal
            xml = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message>"
            xml += "<RequestId>STANDIN</RequestId></Error>"
            return status, {"Content-Type": "application/xml"}, xml.encode()
        relative = path.lstrip("/") or "index.html"
        file = (WEB_DIR / relative).resolve()
        if method == "GET" and file.is_file() and file.is_relative_to(WEB_DIR):
            return 200, {"Content-Type": _TYPES.get(file.suffix, "application/octet-stream")}, file.read_bytes()
        return 404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'


def _handler(stand_in: CognitoStandIn, answer: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # a WebSocket handshake must answer in HTTP/1.1

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            split = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(split.query).items()}
            if split.path == "/live" and self.headers.get("Upgrade", "").lower() == "websocket":
                stand_in.serve_websocket(self, query)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, raw = answer(method, split.path, query, body)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Allow-Headers", "authorization,content-type")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_OPTIONS(self) -> None:
            self._serve("OPTIONS")

    return Handler
