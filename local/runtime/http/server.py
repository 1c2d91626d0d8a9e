"""The one HTTP listener on the local API port, and which stand-in answers each request.

In AWS these are separate endpoints: the HTTP API (API Gateway), CloudFront for the page, Cognito
for sign-in, the WebSocket API for live status. Locally one threaded server on
``127.0.0.1:$LOCAL_API_PORT`` routes each request, in this order, to:

- a CORS preflight: answered as API Gateway does, before routes and authorizers;
- ``/_local/oidc/``: the local identity provider (:mod:`local.runtime.http.identity`);
- ``/_local/live``: the live-status stream, Server-Sent Events (:mod:`local.runtime.http.live_status`);
- ``/_local/health``, ``/status``, ``/outputs``: the stack's control endpoints, and
  ``/_local/faults`` (:mod:`local.runtime.http.fault_api`);
- ``/config.json`` and the files of ``web/`` (:mod:`local.runtime.http.static_site`);
- anything else: the HTTP API (:mod:`local.runtime.http.api_gateway`), once the stack is ready.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rag_ingest.core.access import DEFAULT_TENANT_ADMIN_GROUP, Principal
from rag_ingest.core.auth import InvalidTenantError, InvalidTokenError, bearer_token

from local.runtime.cloudformation.provision import ApiRoute
from local.runtime.http.api_gateway import FORBIDDEN, UNAUTHORIZED, HttpApiGateway, claim_strings
from local.runtime.http.fault_api import FaultApi
from local.runtime.http.identity import OIDC_PATH, LocalIdentityProvider
from local.runtime.http.live_status import LiveStatusHub, LiveStatusUnavailable, stream_events
from local.runtime.http.response import HttpResponse, json_response
from local.runtime.http.static_site import StaticSite
from local.runtime.http.template_api import HttpApiDefinition
from local.runtime.lambda_.runner import LambdaRunner
from local.runtime.settings import LIVE_PATH

LOG = logging.getLogger("local.runtime.api")

_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&\s]*")


class ApiServer:
    """The threaded HTTP server on the API port."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        account_id: str,
        web_dir: Path | None,
        invoke: Callable[[str, bytes], tuple[int, str, bool]],
        health: Callable[[], dict[str, Any]],
        status: Callable[[], dict[str, Any]],
        outputs: Callable[[], dict[str, Any]],
        identity: LocalIdentityProvider,
        page_config: Callable[[], dict[str, Any] | None] = lambda: None,
        live_keepalive_seconds: float = 15.0,
    ) -> None:
        self.host = host
        self.port = port
        self.identity = identity
        self.gateway = HttpApiGateway(host=host, port=port, account_id=account_id, identity=identity, invoke=invoke)
        self.site = StaticSite(web_dir, page_config)
        self.runner: LambdaRunner | None = None
        self.faults = FaultApi(lambda: self.runner)
        self.live: LiveStatusHub | None = None
        self.live_keepalive_seconds = live_keepalive_seconds
        # The live channel announces a document only to who may read it (rag_ingest.core.access).
        self.tenant_admin_group = DEFAULT_TENANT_ADMIN_GROUP
        self._health = health
        self._status = status
        self._outputs = outputs
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_routes(self, routes: list[ApiRoute], definition: HttpApiDefinition | None = None) -> None:
        """The HTTP API's routes, with the template's authorization and CORS (``definition``)."""
        self.gateway.set_routes(routes, definition)

    def start(self) -> None:
        server = self

        class Handler(_RequestHandler):
            pass

        Handler.server_state = server
        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="api-adapter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def control(self, method: str, raw_path: str, raw_query: str, body: bytes) -> HttpResponse:
        """The ``/_local/`` control endpoints (other than the identity provider and the live stream)."""
        route = raw_path.rstrip("/")
        if route == "/_local/health" and method == "GET":
            health = self._health()
            return json_response(HTTPStatus.OK if health.get("ready") else HTTPStatus.SERVICE_UNAVAILABLE, health)
        if route == "/_local/status" and method == "GET":
            return json_response(HTTPStatus.OK, self._status())
        if route == "/_local/outputs" and method == "GET":
            return json_response(HTTPStatus.OK, self._outputs())
        if route == "/_local/faults":
            return self.faults.respond(method, raw_query, body)
        return json_response(HTTPStatus.NOT_FOUND, {"message": f"no control endpoint {method} {raw_path}"})


class _RequestHandler(BaseHTTPRequestHandler):
    server_state: ApiServer
    _origin: str | None = None
    _note = ""
    protocol_version = "HTTP/1.1"
    server_version = "local-api-gateway"
    # Headers and body are separate writes: without TCP_NODELAY a keep-alive client's delayed ACK
    # holds the body back about 40 ms (as in the embedding server).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        # The live stream's request line carries a token: never log it.
        redacted = tuple(_TOKEN_IN_QUERY.sub(r"\1<redacted>", arg) if isinstance(arg, str) else arg for arg in args)
        LOG.debug("%s " + format, self.address_string(), *redacted)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")

    def _handle(self, method: str) -> None:
        started = time.monotonic()
        split = urlsplit(self.path)
        raw_path, raw_query = split.path or "/", split.query
        self._origin = self.headers.get("Origin")
        self._note = ""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            status = self._dispatch(method, raw_path, raw_query, body)
        except Exception as exc:
            LOG.exception("API %s %s failed", method, raw_path)
            status = self._write(
                json_response(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": f"local adapter error: {exc}"})
            )
        if not raw_path.startswith("/_local/") or raw_path.startswith((OIDC_PATH, LIVE_PATH)):
            note = f" ({self._note})" if self._note else ""
            path = raw_path if raw_path.startswith(LIVE_PATH) else self.path  # never log a token
            LOG.info("API %s %s -> %d (%.0f ms)%s", method, path, status, (time.monotonic() - started) * 1000, note)

    def _dispatch(self, method: str, raw_path: str, raw_query: str, body: bytes) -> int:
        server = self.server_state
        if method == "OPTIONS" and self._origin and self.headers.get("Access-Control-Request-Method"):
            # API Gateway answers CORS preflights itself, before routes and authorizers.
            preflight = server.gateway.cors.preflight_headers(
                self._origin,
                self.headers["Access-Control-Request-Method"],
                self.headers.get("Access-Control-Request-Headers", ""),
            )
            return self._write(HttpResponse(HTTPStatus.NO_CONTENT, preflight, cors=False))
        if raw_path.startswith(OIDC_PATH + "/"):
            answer = server.identity.handle(method, raw_path, body)
            return self._write(json_response(answer.status, answer.payload, head=method == "HEAD"))
        if raw_path.rstrip("/") == LIVE_PATH:
            return self._live(method, raw_query)
        if raw_path.startswith("/_local/"):
            return self._write(server.control(method, raw_path, raw_query, body))
        health = server._health()
        page = server.site.respond(method, raw_path, health)
        if page is not None:
            return self._write(page)
        if not health.get("ready"):
            return self._write(
                json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
            )
        return self._write(
            server.gateway.respond(
                method=method,
                raw_path=raw_path,
                raw_query=raw_query,
                headers=list(self.headers.items()),
                body=body,
                source_ip=self.client_address[0],
            )
        )

    def _live(self, method: str, raw_query: str) -> int:
        """``GET /_local/live?token=...``: the tenant's document updates as Server-Sent Events."""
        server = self.server_state
        if method != "GET":
            return self._write(json_response(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "GET with ?token=<ID token>"}))
        tokens = parse_qs(raw_query).get("token")
        try:
            # EventSource cannot send headers: the token is in the query (a fetch client may use the header).
            token = tokens[0] if tokens else bearer_token(self.headers.get("Authorization"))
            claims = server.gateway.verify(token)
            # The claims as the JWT authorizer passes them (groups as "[a b]"), read as the API reads them.
            caller = Principal.of(claim_strings(claims), server.tenant_admin_group)
            tenant = caller.tenant_id
        except InvalidTokenError as exc:
            return self._write(json_response(HTTPStatus.UNAUTHORIZED, UNAUTHORIZED, note=str(exc)))
        except InvalidTenantError as exc:
            return self._write(json_response(HTTPStatus.FORBIDDEN, FORBIDDEN, note=str(exc)))
        hub = server.live
        try:
            if hub is None:
                raise LiveStatusUnavailable("the live channel is not running (is the stack ready?)")
            subscription = hub.subscribe(tenant, caller)
        except LiveStatusUnavailable as exc:
            return self._write(json_response(HTTPStatus.SERVICE_UNAVAILABLE, {"message": str(exc)}))
        self._note = f"tenant {tenant}"
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Accel-Buffering", "no")
            self.send_header("Connection", "close")  # the stream ends with the connection
            for name, value in server.gateway.cors.response_headers(self._origin).items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True

            def write(chunk: bytes) -> None:
                self.wfile.write(chunk)
                self.wfile.flush()

            stream_events(subscription, write, keepalive_seconds=server.live_keepalive_seconds)
            if subscription.reason:
                self._note += f", closed: {subscription.reason}"
        except OSError:
            self._note += ", the client left"
        finally:
            hub.unsubscribe(subscription)
        return int(HTTPStatus.OK)

    def _write(self, response: HttpResponse) -> int:
        if response.note:
            self._note = response.note
        self.send_response(response.status)
        lower = {name.lower() for name in response.headers}
        for name, value in response.headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        if response.cors:
            # As API Gateway with a CorsConfiguration: only for an allowed Origin.
            for name, value in self.server_state.gateway.cors.response_headers(self._origin).items():
                if name.lower() not in lower:
                    self.send_header(name, value)
        for cookie in response.cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        # A HEAD answer never has a body, whoever produced it (the function, the authorizer, a 404).
        if not response.head and self.command != "HEAD":
            self.wfile.write(response.body)
        return int(response.status)
