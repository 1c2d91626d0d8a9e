"""A local stand-in for the HTTP API: requests become API Gateway payload v2.0 events.

Routes are the template's ``AWS::ApiGatewayV2::Route`` route keys; each request is invoked
through moto's Lambda Invoke API (so it runs in the Lambda runner). Routes with
``AuthorizationType: JWT`` are authorized as the HTTP API's JWT authorizer does it: the
``Authorization: Bearer`` ID token is verified (issuer, audience, expiry, RS256 signature against
the local identity provider's JWKS, :class:`rag_ingest.auth.TokenVerifier`), else
``401 {"message":"Unauthorized"}``; its claims reach the function in
``requestContext.authorizer.jwt.claims`` (every value a string, as API Gateway passes them).
CORS follows the template's ``CorsConfiguration`` (see :mod:`local.runtime.http_api`).

The same server serves ``web/`` at ``/``, the page's ``/config.json``, and under ``/_local/``
the identity provider (``oidc/``), the live-status stream (``live``) and the control endpoints
(health, status, outputs, fault injection for tests).
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import mimetypes
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from rag_ingest.auth import InvalidTenantError, InvalidTokenError, TokenVerifier, bearer_token, tenant_of

from local.runtime.faults import Fault
from local.runtime.http_api import CorsPolicy, HttpApiDefinition, RouteAuthorization
from local.runtime.identity import OIDC_PATH, LocalIdentityProvider
from local.runtime.lambda_runner import LambdaRunner
from local.runtime.live_status import LiveStatusHub, LiveStatusUnavailable, stream_events
from local.runtime.provision import ApiRoute

LOG = logging.getLogger("local.runtime.api")

_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))", re.I)
LIVE_PATH = "/_local/live"
_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&\s]*")
PAGE_CONFIG_PATH = "/config.json"
# API Gateway's own answers when the authorizer refuses a request.
UNAUTHORIZED = {"message": "Unauthorized"}
FORBIDDEN = {"message": "Forbidden"}
# Without a CorsConfiguration in the template, only the local page's origins get CORS headers.
_LOCAL_PAGE_CORS = CorsPolicy(
    allow_origins=(),
    allow_methods=("GET", "POST", "DELETE", "OPTIONS"),
    allow_headers=("authorization", "content-type"),
    max_age=600,
)


def claim_strings(claims: dict[str, Any]) -> dict[str, str]:
    """Claims as the JWT authorizer passes them in payload 2.0: every value a string."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list | tuple):
            return "[" + " ".join(text(item) for item in value) + "]"
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    return {str(name): text(value) for name, value in claims.items()}


@dataclass(frozen=True)
class Authorization:
    """The authorizer's verdict: claims to pass on, or the status and body API Gateway answers."""

    claims: dict[str, Any] | None = None
    status: int = HTTPStatus.OK
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == HTTPStatus.OK


@dataclass(frozen=True)
class CompiledRoute:
    route: ApiRoute
    pattern: re.Pattern[str] | None  # None: $default
    parameter_names: tuple[str, ...]
    specificity: tuple[int, ...]

    @classmethod
    def compile(cls, route: ApiRoute) -> CompiledRoute:
        if route.path_template is None:
            return cls(route, None, (), (1, 0, 0, 0, 0))
        names: list[str] = []
        parts: list[str] = []
        greedy = 0
        literal_length = 0
        for segment in (part for part in route.path_template.split("/") if part):
            match = re.fullmatch(r"\{([^{}+]+)(\+)?\}", segment)
            if match:
                group = f"p{len(names)}"
                names.append(match.group(1))
                greedy += int(bool(match.group(2)))
                parts.append(f"/(?P<{group}>.+)" if match.group(2) else f"/(?P<{group}>[^/]+)")
            else:
                parts.append("/" + re.escape(segment))
                literal_length += len(segment)
        pattern = "^" + "".join(parts) + "/?$" if parts else "^/$"
        # Most specific first: no $default, fewer greedy and plain parameters, a method, longer literals.
        specificity = (0, greedy, len(names) - greedy, int(route.method == "ANY"), -literal_length)
        return cls(route, re.compile(pattern), tuple(names), specificity)

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.route.method not in ("ANY", method):
            return None
        if self.pattern is None:
            return {}
        found = self.pattern.match(path)
        if found is None:
            return None
        return {name: unquote(found.group(f"p{index}")) for index, name in enumerate(self.parameter_names)}


class ApiGatewayAdapter:
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
        self.account_id = account_id
        self.web_dir = web_dir.resolve() if web_dir is not None and web_dir.is_dir() else None
        self.runner: LambdaRunner | None = None
        self.identity = identity
        self.live: LiveStatusHub | None = None
        self.live_keepalive_seconds = live_keepalive_seconds
        self._invoke = invoke
        self._health = health
        self._status = status
        self._outputs = outputs
        self._page_config = page_config
        self._routes: list[CompiledRoute] = []
        self._definition = HttpApiDefinition()
        self._verifiers: dict[str, TokenVerifier] = {}
        # The page is served by this server: its origins are always allowed.
        self.page_origins = (f"http://{host}:{port}", f"http://localhost:{port}")
        self._cors = _LOCAL_PAGE_CORS.with_origins(self.page_origins)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_routes(self, routes: list[ApiRoute], definition: HttpApiDefinition | None = None) -> None:
        """The routes to serve, with the template's authorization and CORS (``definition``)."""
        if definition is not None:
            self._definition = definition
            self._cors = (definition.cors or _LOCAL_PAGE_CORS).with_origins(self.page_origins)
            if definition.routes:
                # Only the HTTP API's routes: a WebSocket API's $connect/$default are not HTTP routes.
                routes = [route for route in routes if route.route_key in definition.routes]
        self._routes = sorted((CompiledRoute.compile(route) for route in routes), key=lambda r: r.specificity)

    @property
    def cors(self) -> CorsPolicy:
        return self._cors

    def authorize(self, route_key: str, requires_jwt: bool, headers: dict[str, str]) -> Authorization:
        """What the route's authorizer decides for a request with these (lower-cased) headers."""
        authorization = self._definition.routes.get(route_key)
        if authorization is None:
            authorization = RouteAuthorization("JWT" if requires_jwt else "NONE")
        if authorization.authorization_type == "NONE":
            return Authorization()
        if not authorization.requires_jwt:
            return Authorization(
                status=HTTPStatus.FORBIDDEN,
                reason=f"{authorization.authorization_type} routes are not emulated locally",
            )
        header = authorization.authorizer.identity_header if authorization.authorizer else "authorization"
        audiences = authorization.authorizer.audiences if authorization.authorizer else self.audiences()
        try:
            claims = self.verify(bearer_token(headers.get(header)), audiences)
        except InvalidTokenError as exc:
            return Authorization(status=HTTPStatus.UNAUTHORIZED, reason=str(exc))
        if authorization.scopes:
            granted = set(str(claims.get("scope", "")).split())
            if not granted & set(authorization.scopes):
                return Authorization(status=HTTPStatus.FORBIDDEN, reason="the token has none of the route's scopes")
        return Authorization(claims=claims)

    def audiences(self) -> tuple[str, ...]:
        return self._definition.audiences or ((self.identity.audience,) if self.identity.audience else ())

    def verify(self, token: str, audiences: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Verified claims of ``token`` for one of ``audiences`` (the authorizer's), else InvalidTokenError."""
        targets = audiences if audiences is not None else self.audiences()
        if not targets:
            raise InvalidTokenError("no audience is configured for this authorizer")
        error: InvalidTokenError | None = None
        for audience in targets:
            verifier = self._verifiers.get(audience)
            if verifier is None:
                verifier = self._verifiers[audience] = self.identity.verifier(audience)
            try:
                return verifier.verify(token)
            except InvalidTokenError as exc:
                error = exc
        assert error is not None
        raise error

    def start(self) -> None:
        adapter = self

        class Handler(_RequestHandler):
            pass

        Handler.adapter = adapter
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

    # -- request handling ---------------------------------------------------------------------

    def find_route(self, method: str, path: str) -> tuple[CompiledRoute, dict[str, str]] | None:
        for compiled in self._routes:
            parameters = compiled.match(method, path)
            if parameters is not None:
                return compiled, parameters
        return None

    def build_event(
        self,
        *,
        compiled: CompiledRoute,
        path_parameters: dict[str, str],
        method: str,
        raw_path: str,
        raw_query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str,
        claims: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """An API Gateway HTTP API payload format 2.0 event (``claims``: the authorizer's, if any)."""
        joined: dict[str, str] = {}
        cookies: list[str] = []
        for name, value in headers:
            key = name.lower()
            if key == "cookie":
                cookies.extend(part.strip() for part in value.split(";") if part.strip())
                continue
            joined[key] = f"{joined[key]},{value}" if key in joined else value
        query: dict[str, str] = {}
        for name, value in parse_qsl(raw_query, keep_blank_values=True):
            query[name] = f"{query[name]},{value}" if name in query else value
        now = datetime.datetime.now(datetime.UTC)
        host = joined.get("host", f"{self.host}:{self.port}")
        request_context: dict[str, Any] = {
            "accountId": self.account_id,
            "apiId": "local",
            "domainName": host,
            "domainPrefix": host.split(".")[0],
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": joined.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": compiled.route.route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        }
        if claims is not None:
            scopes = str(claims.get("scope", "")).split()
            request_context["authorizer"] = {"jwt": {"claims": claim_strings(claims), "scopes": scopes or None}}
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": compiled.route.route_key,
            "rawPath": raw_path,
            "rawQueryString": raw_query,
            "headers": joined,
            "requestContext": request_context,
            "isBase64Encoded": False,
        }
        if cookies:
            event["cookies"] = cookies
        if query:
            event["queryStringParameters"] = query
        if path_parameters:
            event["pathParameters"] = path_parameters
        if body:
            content_type = joined.get("content-type", "")
            if _TEXT_TYPES.match(content_type):
                try:
                    event["body"] = body.decode("utf-8")
                except UnicodeDecodeError:
                    event["body"] = base64.b64encode(body).decode()
                    event["isBase64Encoded"] = True
            else:
                event["body"] = base64.b64encode(body).decode()
                event["isBase64Encoded"] = True
        return event

    @staticmethod
    def http_response(payload: str) -> tuple[int, dict[str, str], list[str], bytes]:
        """The HTTP response for a Lambda result (payload 2.0 rules, incl. the inferred format)."""
        try:
            result = json.loads(payload) if payload.strip() else None
        except ValueError:
            result = payload
        if isinstance(result, dict) and "statusCode" in result:
            headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
            for name, values in (result.get("multiValueHeaders") or {}).items():
                headers[str(name)] = ",".join(str(value) for value in values)
            body = result.get("body")
            if body is None:
                raw = b""
            elif result.get("isBase64Encoded"):
                raw = base64.b64decode(str(body))
            else:
                raw = (body if isinstance(body, str) else json.dumps(body)).encode()
            cookies = [str(cookie) for cookie in result.get("cookies") or []]
            return int(result["statusCode"]), headers, cookies, raw
        # No statusCode: API Gateway infers 200 and a JSON body of the returned value.
        return 200, {"content-type": "application/json"}, [], payload.encode()


class _RequestHandler(BaseHTTPRequestHandler):
    adapter: ApiGatewayAdapter
    _origin: str | None = None
    _note = ""
    protocol_version = "HTTP/1.1"
    server_version = "local-api-gateway"

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
            status = self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": f"local adapter error: {exc}"})
        if not raw_path.startswith("/_local/") or raw_path.startswith((OIDC_PATH, LIVE_PATH)):
            note = f" ({self._note})" if self._note else ""
            path = raw_path if raw_path.startswith(LIVE_PATH) else self.path  # never log a token
            LOG.info("API %s %s -> %d (%.0f ms)%s", method, path, status, (time.monotonic() - started) * 1000, note)

    def _dispatch(self, method: str, raw_path: str, raw_query: str, body: bytes) -> int:
        adapter = self.adapter
        if method == "OPTIONS" and self._origin and self.headers.get("Access-Control-Request-Method"):
            # API Gateway answers CORS preflights itself, before routes and authorizers.
            preflight = adapter.cors.preflight_headers(
                self._origin,
                self.headers["Access-Control-Request-Method"],
                self.headers.get("Access-Control-Request-Headers", ""),
            )
            return self._send(HTTPStatus.NO_CONTENT, preflight, [], b"", cors=False)
        if raw_path.startswith(OIDC_PATH + "/"):
            answer = adapter.identity.handle(method, raw_path, body)
            return self._send_json(answer.status, answer.payload, head=method == "HEAD")
        if raw_path.rstrip("/") == LIVE_PATH:
            return self._live(method, raw_query)
        if raw_path.startswith("/_local/"):
            return self._control(method, raw_path, raw_query, body)
        health = adapter._health()
        if raw_path == PAGE_CONFIG_PATH and method in ("GET", "HEAD"):
            config = adapter._page_config() if health.get("ready") else None
            if config is None:
                return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
            raw = json.dumps(config, indent=2).encode()
            headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
            return self._send(HTTPStatus.OK, headers, [], raw, head=method == "HEAD")
        if method in ("GET", "HEAD"):
            static = self._static_file(raw_path)
            if static is not None:
                return self._send_file(static, head=method == "HEAD")
        if not health.get("ready"):
            return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
        found = adapter.find_route(method, raw_path)
        if found is None:
            if method == "OPTIONS":
                return self._send(HTTPStatus.NO_CONTENT, {}, [], b"")
            return self._send_json(HTTPStatus.NOT_FOUND, {"message": "Not Found"})
        compiled, path_parameters = found
        request_headers = list(self.headers.items())
        verdict = adapter.authorize(
            compiled.route.route_key,
            compiled.route.requires_jwt,
            {name.lower(): value for name, value in request_headers},
        )
        if not verdict.allowed:
            self._note = verdict.reason
            if verdict.status == HTTPStatus.UNAUTHORIZED:
                challenge = 'Bearer error="invalid_token"' if self.headers.get("Authorization") else "Bearer"
                return self._send_json(verdict.status, UNAUTHORIZED, extra={"WWW-Authenticate": challenge})
            return self._send_json(verdict.status, FORBIDDEN)
        event = adapter.build_event(
            compiled=compiled,
            path_parameters=path_parameters,
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=request_headers,
            body=body,
            source_ip=self.client_address[0],
            claims=verdict.claims,
        )
        status_code, payload, errored = adapter._invoke(compiled.route.function_name, json.dumps(event).encode())
        if errored or status_code != 200:
            LOG.warning("API %s %s: function error %s", method, raw_path, payload[:500])
            return self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal Server Error"})
        code, response_headers, cookies, raw = adapter.http_response(payload)
        return self._send(code, response_headers, cookies, raw, head=method == "HEAD")

    def _live(self, method: str, raw_query: str) -> int:
        """``GET /_local/live?token=...``: the tenant's document updates as Server-Sent Events."""
        adapter = self.adapter
        if method != "GET":
            return self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "GET with ?token=<ID token>"})
        tokens = parse_qs(raw_query).get("token")
        try:
            # EventSource cannot send headers: the token is in the query (a fetch client may use the header).
            token = tokens[0] if tokens else bearer_token(self.headers.get("Authorization"))
            claims = adapter.verify(token)
            tenant = tenant_of(claims)
        except InvalidTokenError as exc:
            self._note = str(exc)
            return self._send_json(HTTPStatus.UNAUTHORIZED, UNAUTHORIZED)
        except InvalidTenantError as exc:
            self._note = str(exc)
            return self._send_json(HTTPStatus.FORBIDDEN, FORBIDDEN)
        hub = adapter.live
        try:
            if hub is None:
                raise LiveStatusUnavailable("the live channel is not running (is the stack ready?)")
            subscription = hub.subscribe(tenant)
        except LiveStatusUnavailable as exc:
            return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"message": str(exc)})
        self._note = f"tenant {tenant}"
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Accel-Buffering", "no")
            self.send_header("Connection", "close")  # the stream ends with the connection
            for name, value in adapter.cors.response_headers(self._origin).items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True

            def write(chunk: bytes) -> None:
                self.wfile.write(chunk)
                self.wfile.flush()

            stream_events(subscription, write, keepalive_seconds=adapter.live_keepalive_seconds)
            if subscription.reason:
                self._note += f", closed: {subscription.reason}"
        except OSError:
            self._note += ", the client left"
        finally:
            hub.unsubscribe(subscription)
        return int(HTTPStatus.OK)

    def _control(self, method: str, raw_path: str, raw_query: str, body: bytes) -> int:
        adapter = self.adapter
        route = raw_path.rstrip("/")
        if route == "/_local/health" and method == "GET":
            health = adapter._health()
            return self._send_json(HTTPStatus.OK if health.get("ready") else HTTPStatus.SERVICE_UNAVAILABLE, health)
        if route == "/_local/status" and method == "GET":
            return self._send_json(HTTPStatus.OK, adapter._status())
        if route == "/_local/outputs" and method == "GET":
            return self._send_json(HTTPStatus.OK, adapter._outputs())
        if route == "/_local/faults":
            return self._faults(method, raw_query, body)
        return self._send_json(HTTPStatus.NOT_FOUND, {"message": f"no control endpoint {method} {raw_path}"})

    def _faults(self, method: str, raw_query: str, body: bytes) -> int:
        runner = self.adapter.runner
        if runner is None:
            return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "the Lambda runner is not ready"})
        if method == "GET":
            return self._send_json(
                HTTPStatus.OK, {"faults": runner.faults.pending(), "injected": runner.faults.injected()}
            )
        if method == "DELETE":
            name = dict(parse_qsl(raw_query)).get("function")
            target = runner.find_function(name) if name else None
            if name and target is None:
                return self._send_json(HTTPStatus.NOT_FOUND, {"message": f"unknown function {name}"})
            cleared = runner.faults.clear(target.name if target else None)
            return self._send_json(HTTPStatus.OK, {"cleared": cleared})
        if method != "POST":
            return self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "GET, POST or DELETE"})
        try:
            request = json.loads(body or b"{}")
            name = str(request["function"])
            mode = str(request.get("mode", "raise"))
            times = int(request.get("times", 1))
            after = float(request["after_seconds"]) if request.get("after_seconds") is not None else None
            match = request.get("match")
            probability = float(request.get("probability", 1.0))
        except (ValueError, KeyError, TypeError) as exc:
            return self._send_json(HTTPStatus.BAD_REQUEST, {"message": f"bad fault request: {exc}"})
        function = runner.find_function(name)
        if function is None:
            known = sorted(f.display_name for f in runner.functions)
            return self._send_json(HTTPStatus.NOT_FOUND, {"message": f"unknown function {name}", "known": known})
        error_type = str(request.get("error_type", "TransientError"))
        fault = Fault(
            function_name=function.name,
            mode=mode,  # type: ignore[arg-type]  # validated by FaultInjector.add
            error_type=error_type,
            error_message=str(request.get("error_message", f"injected fault: {error_type}")),
            remaining=times,
            after_seconds=after,
            match=str(match) if match else None,
            probability=probability,
        )
        try:
            runner.faults.add(fault)
        except ValueError as exc:
            return self._send_json(HTTPStatus.BAD_REQUEST, {"message": str(exc)})
        LOG.warning("fault armed: %s", fault.describe())
        return self._send_json(HTTPStatus.CREATED, fault.describe())

    def _static_file(self, raw_path: str) -> Path | None:
        web_dir = self.adapter.web_dir
        if web_dir is None:
            return None
        relative = unquote(raw_path).lstrip("/") or "index.html"
        try:
            candidate = (web_dir / relative).resolve()
        except ValueError:  # an embedded NUL (%00): no file has that name, the API routes decide
            return None
        if candidate.is_dir():
            candidate = candidate / "index.html"
        if not candidate.is_file() or not candidate.is_relative_to(web_dir):
            return None
        return candidate

    def _send_file(self, path: Path, *, head: bool) -> int:
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return self._send(HTTPStatus.OK, {"Content-Type": content_type}, [], path.read_bytes(), head=head)

    def _send_json(self, status: int, payload: Any, *, head: bool = False, extra: dict[str, str] | None = None) -> int:
        raw = json.dumps(payload, indent=2, default=str).encode()
        return self._send(status, {"Content-Type": "application/json", **(extra or {})}, [], raw, head=head)

    def _send(
        self,
        status: int,
        headers: dict[str, str],
        cookies: list[str],
        body: bytes,
        *,
        head: bool = False,
        cors: bool = True,
    ) -> int:
        self.send_response(status)
        lower = {name.lower() for name in headers}
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        if cors:
            # As API Gateway with a CorsConfiguration: only for an allowed Origin.
            for name, value in self.adapter.cors.response_headers(self._origin).items():
                if name.lower() not in lower:
                    self.send_header(name, value)
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # A HEAD answer never has a body, whoever produced it (the function, the authorizer, a 404).
        if not head and self.command != "HEAD":
            self.wfile.write(body)
        return int(status)
