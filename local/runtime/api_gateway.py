"""A local stand-in for the HTTP API: requests become API Gateway payload v2.0 events.

Routes are the template's ``AWS::ApiGatewayV2::Route`` route keys; each request is invoked
through moto's Lambda Invoke API (so it runs in the Lambda runner). Local only: the JWT
authorizer is replaced by the ``X-Tenant-Id`` request header (default ``demo``), which becomes
the ``custom:tenant_id`` claim; in AWS the Cognito JWT authorizer provides the claims.

The same server serves ``web/`` at ``/`` and the control endpoints under ``/_local/``
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
from urllib.parse import parse_qsl, unquote, urlsplit

from local.runtime.lambda_runner import Fault, LambdaRunner
from local.runtime.provision import ApiRoute

LOG = logging.getLogger("local.runtime.api")

DEFAULT_TENANT = "demo"
TENANT_HEADER = "x-tenant-id"
_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))", re.I)
_CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET,POST,PUT,PATCH,DELETE,OPTIONS",
    "Access-Control-Allow-Headers": "authorization,content-type,x-tenant-id",
    "Access-Control-Max-Age": "600",
}


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
    ) -> None:
        self.host = host
        self.port = port
        self.account_id = account_id
        self.web_dir = web_dir.resolve() if web_dir is not None and web_dir.is_dir() else None
        self.runner: LambdaRunner | None = None
        self._invoke = invoke
        self._health = health
        self._status = status
        self._outputs = outputs
        self._routes: list[CompiledRoute] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_routes(self, routes: list[ApiRoute]) -> None:
        self._routes = sorted((CompiledRoute.compile(route) for route in routes), key=lambda r: r.specificity)

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
    ) -> dict[str, Any]:
        """An API Gateway HTTP API payload format 2.0 event."""
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
        if compiled.route.requires_jwt:
            tenant = joined.get(TENANT_HEADER) or DEFAULT_TENANT
            # Local stand-in for the Cognito JWT authorizer (see module docstring).
            request_context["authorizer"] = {
                "jwt": {
                    "claims": {
                        "sub": f"local-user-{tenant}",
                        "custom:tenant_id": tenant,
                        "cognito:username": f"local-user-{tenant}",
                        "token_use": "id",
                        "iss": "local-stack",
                    },
                    "scopes": None,
                }
            }
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
    protocol_version = "HTTP/1.1"
    server_version = "local-api-gateway"

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

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
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            status = self._dispatch(method, raw_path, raw_query, body)
        except Exception as exc:
            LOG.exception("API %s %s failed", method, raw_path)
            status = self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": f"local adapter error: {exc}"})
        if not raw_path.startswith("/_local/"):
            LOG.info("API %s %s -> %d (%.0f ms)", method, self.path, status, (time.monotonic() - started) * 1000)

    def _dispatch(self, method: str, raw_path: str, raw_query: str, body: bytes) -> int:
        adapter = self.adapter
        if raw_path.startswith("/_local/"):
            return self._control(method, raw_path, raw_query, body)
        health = adapter._health()
        if method in ("GET", "HEAD"):
            static = self._static_file(raw_path)
            if static is not None:
                return self._send_file(static, head=method == "HEAD")
        if not health.get("ready"):
            return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "local stack is starting", **health})
        found = adapter.find_route(method, raw_path)
        if found is None:
            if method == "OPTIONS":
                return self._send(HTTPStatus.NO_CONTENT, {}, [], b"")  # CORS preflight
            return self._send_json(HTTPStatus.NOT_FOUND, {"message": "Not Found"})
        compiled, path_parameters = found
        event = adapter.build_event(
            compiled=compiled,
            path_parameters=path_parameters,
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
        )
        status_code, payload, errored = adapter._invoke(compiled.route.function_name, json.dumps(event).encode())
        if errored or status_code != 200:
            LOG.warning("API %s %s: function error %s", method, raw_path, payload[:500])
            return self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal Server Error"})
        code, headers, cookies, raw = adapter.http_response(payload)
        return self._send(code, headers, cookies, raw, head=method == "HEAD")

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

    def _send_json(self, status: int, payload: Any) -> int:
        raw = json.dumps(payload, indent=2, default=str).encode()
        return self._send(status, {"Content-Type": "application/json"}, [], raw)

    def _send(
        self, status: int, headers: dict[str, str], cookies: list[str], body: bytes, *, head: bool = False
    ) -> int:
        self.send_response(status)
        lower = {name.lower() for name in headers}
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        for name, value in _CORS_HEADERS.items():
            if name.lower() not in lower:
                self.send_header(name, value)
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        return int(status)
