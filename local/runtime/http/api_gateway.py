"""The HTTP API (API Gateway v2) in front of the API function: routes, JWT authorizer, payload 2.0.

Routes are the template's ``AWS::ApiGatewayV2::Route`` keys, matched as API Gateway matches them
(most specific first; ``{param}``, ``{proxy+}``, ``$default``). A ``JWT`` route's token is verified
as the JWT authorizer does (:class:`rag_ingest.core.auth.TokenVerifier` against the local issuer),
else ``401 {"message":"Unauthorized"}``; claims reach the function as strings. The request becomes
a payload format 2.0 event, invoked through moto's Lambda backend (the runner), and the result a
Werkzeug response. CORS is the template's (:mod:`local.runtime.http.template_api`).
Rationale: docs/local-stack.md, "The API adapter".
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote

from rag_ingest.core.auth import InvalidTokenError, TokenVerifier, bearer_token

from local.runtime.cloudformation.provisioned import ApiRoute
from local.runtime.http.identity import LocalIdentityProvider
from local.runtime.http.response import LocalResponse, json_response
from local.runtime.http.template_api import CorsPolicy, HttpApiDefinition, RouteAuthorization

LOG = logging.getLogger("local.runtime.api")

_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))", re.I)
# The server frames the body itself: a function's values for these are not passed on.
_HOP_BY_HOP = frozenset({"content-length", "connection", "transfer-encoding"})
# API Gateway's own answers when the authorizer refuses a request.
UNAUTHORIZED = {"message": "Unauthorized"}
FORBIDDEN = {"message": "Forbidden"}
# Without a CorsConfiguration in the template, only the local page's origins get CORS headers.
_LOCAL_PAGE_CORS = CorsPolicy(
    allow_origins=(),
    allow_methods=("GET", "POST", "DELETE", "PATCH", "OPTIONS"),
    allow_headers=("authorization", "content-type", "if-match"),
    expose_headers=("etag",),
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


class HttpApiGateway:
    """The HTTP API's routes and authorizer, answering one request at a time."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        account_id: str,
        identity: LocalIdentityProvider,
        invoke: Callable[[str, bytes], tuple[int, str, bool]],
    ) -> None:
        self.host = host
        self.port = port
        self.account_id = account_id
        self.identity = identity
        self._invoke = invoke
        self._routes: list[CompiledRoute] = []
        self._definition = HttpApiDefinition()
        self._verifiers: dict[str, TokenVerifier] = {}
        # The page is served on the same port: its origins are always allowed.
        self.page_origins = (f"http://{host}:{port}", f"http://localhost:{port}")
        self._cors = _LOCAL_PAGE_CORS.with_origins(self.page_origins)

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

    def respond(
        self,
        *,
        method: str,
        raw_path: str,
        raw_query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str,
    ) -> LocalResponse:
        """API Gateway's answer to a request: no route, the authorizer's refusal, or the function's."""
        found = self.find_route(method, raw_path)
        if found is None:
            if method == "OPTIONS":
                return LocalResponse(status=HTTPStatus.NO_CONTENT)
            return json_response(HTTPStatus.NOT_FOUND, {"message": "Not Found"})
        compiled, path_parameters = found
        lowered = {name.lower(): value for name, value in headers}
        verdict = self.authorize(compiled.route.route_key, compiled.route.requires_jwt, lowered)
        if not verdict.allowed:
            if verdict.status == HTTPStatus.UNAUTHORIZED:
                challenge = 'Bearer error="invalid_token"' if lowered.get("authorization") else "Bearer"
                return json_response(
                    verdict.status, UNAUTHORIZED, headers={"WWW-Authenticate": challenge}, note=verdict.reason
                )
            return json_response(verdict.status, FORBIDDEN, note=verdict.reason)
        event = self.build_event(
            compiled=compiled,
            path_parameters=path_parameters,
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=headers,
            body=body,
            source_ip=source_ip,
            claims=verdict.claims,
        )
        status_code, payload, errored = self._invoke(compiled.route.function_name, json.dumps(event).encode())
        if errored or status_code != 200:
            LOG.warning("API %s %s: function error %s", method, raw_path, payload[:500])
            return json_response(HTTPStatus.INTERNAL_SERVER_ERROR, {"message": "Internal Server Error"})
        return self.http_response(payload)

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
    def http_response(payload: str) -> LocalResponse:
        """The HTTP response for a Lambda result (payload 2.0 rules, incl. the inferred format)."""
        try:
            result = json.loads(payload) if payload.strip() else None
        except ValueError:
            result = payload
        if not (isinstance(result, dict) and "statusCode" in result):
            # No statusCode: API Gateway infers 200 and a JSON body of the returned value.
            return LocalResponse(payload, HTTPStatus.OK, content_type="application/json")
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
        response = LocalResponse(raw, int(result["statusCode"]))
        del response.headers["Content-Type"]  # only the function's own, as API Gateway sends
        for name, value in headers.items():
            if name.lower() not in _HOP_BY_HOP:
                response.headers[name] = value
        for cookie in result.get("cookies") or []:
            response.headers.add("Set-Cookie", str(cookie))
        return response
