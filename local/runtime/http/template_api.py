"""What the local API server reads from the template's HTTP API: authorization per route, and CORS.

A ``JWT`` route's ``AWS::ApiGatewayV2::Authorizer`` gives the identity header and the audiences
(the template's, resolved locally; the issuer is the local identity provider); its
``AuthorizationScopes`` must meet the token's ``scope``; ``NONE`` routes need no token.
:class:`CorsPolicy` is API Gateway's reading of ``CorsConfiguration``: preflights answered before
authorizers, ``Access-Control-Allow-Origin`` only for an allowed ``Origin``. Kept ours: flask-cors
answers preflights differently (docs/local-stack.md, "CORS"). Imports the template reader only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver

DEFAULT_IDENTITY_HEADER = "authorization"


@dataclass(frozen=True)
class JwtAuthorizer:
    logical_id: str
    audiences: tuple[str, ...]
    # The header named by the identity source (lower case).
    identity_header: str = DEFAULT_IDENTITY_HEADER


@dataclass(frozen=True)
class RouteAuthorization:
    authorization_type: str  # NONE, JWT (AWS_IAM and CUSTOM are not emulated: such routes are refused)
    authorizer: JwtAuthorizer | None = None
    scopes: tuple[str, ...] = ()

    @property
    def requires_jwt(self) -> bool:
        return self.authorization_type == "JWT"


@dataclass(frozen=True)
class CorsPolicy:
    allow_origins: tuple[str, ...]
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    allow_credentials: bool = False

    def allows_origin(self, origin: str) -> bool:
        return "*" in self.allow_origins or origin.rstrip("/").lower() in {o.lower() for o in self.allow_origins}

    def with_origins(self, origins: Iterable[str]) -> CorsPolicy:
        extra = tuple(origin for origin in origins if origin not in self.allow_origins)
        return CorsPolicy(
            allow_origins=self.allow_origins + extra,
            allow_methods=self.allow_methods,
            allow_headers=self.allow_headers,
            expose_headers=self.expose_headers,
            max_age=self.max_age,
            allow_credentials=self.allow_credentials,
        )

    def response_headers(self, origin: str | None) -> dict[str, str]:
        """Headers for an actual (non-preflight) response to a request from ``origin``."""
        if not origin or not self.allows_origin(origin):
            return {}
        headers = {"Access-Control-Allow-Origin": self._allowed_origin_value(origin)}
        if self.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        if self.expose_headers:
            headers["Access-Control-Expose-Headers"] = ",".join(self.expose_headers)
        if headers["Access-Control-Allow-Origin"] != "*":
            headers["Vary"] = "Origin"
        return headers

    def preflight_headers(self, origin: str, method: str, request_headers: str) -> dict[str, str]:
        """Headers of API Gateway's answer to a preflight; empty when the request is not allowed."""
        if not self.allows_origin(origin):
            return {}
        methods = {m.upper() for m in self.allow_methods}
        if "*" not in methods and method.upper() not in methods:
            return {}
        asked = [h.strip().lower() for h in request_headers.split(",") if h.strip()]
        allowed_headers = {h.lower() for h in self.allow_headers}
        if "*" not in allowed_headers and any(h not in allowed_headers for h in asked):
            return {}
        headers = self.response_headers(origin)
        headers["Access-Control-Allow-Methods"] = ",".join(self.allow_methods)
        if self.allow_headers:
            headers["Access-Control-Allow-Headers"] = ",".join(self.allow_headers)
        if self.max_age is not None:
            headers["Access-Control-Max-Age"] = str(self.max_age)
        return headers

    def _allowed_origin_value(self, origin: str) -> str:
        if "*" in self.allow_origins and not self.allow_credentials:
            return "*"
        return origin


@dataclass(frozen=True)
class HttpApiDefinition:
    """Authorization by route key and the CORS policy of the template's HTTP API(s)."""

    routes: Mapping[str, RouteAuthorization] = field(default_factory=dict)
    cors: CorsPolicy | None = None

    @property
    def audiences(self) -> tuple[str, ...]:
        found: list[str] = []
        for route in self.routes.values():
            if route.authorizer is not None:
                found.extend(a for a in route.authorizer.audiences if a not in found)
        return tuple(found)

    def authorization(self, route_key: str) -> RouteAuthorization:
        return self.routes.get(route_key, RouteAuthorization("NONE"))

    @classmethod
    def from_template(cls, template: CloudFormationTemplate, resolver: IntrinsicResolver) -> HttpApiDefinition:
        present = [r for r in template.resources.values() if r.condition is None or resolver.condition(r.condition)]
        apis = [r for r in present if r.type == "AWS::ApiGatewayV2::Api"]
        http_apis = {r.logical_id: r for r in apis if str(r.properties.get("ProtocolType", "HTTP")).upper() == "HTTP"}
        other_apis = {r.logical_id for r in apis} - set(http_apis)
        authorizers: dict[str, JwtAuthorizer] = {}
        for resource in present:
            if resource.type != "AWS::ApiGatewayV2::Authorizer":
                continue
            props = _resolved(resolver, resource.properties)
            if str(props.get("AuthorizerType", "")).upper() != "JWT":
                continue
            jwt_configuration = props.get("JwtConfiguration") or {}
            audiences = tuple(str(a) for a in jwt_configuration.get("Audience") or [])
            sources = props.get("IdentitySource") or []
            header = DEFAULT_IDENTITY_HEADER
            if sources and str(sources[0]).lower().startswith("$request.header."):
                header = str(sources[0])[len("$request.header.") :].lower()
            authorizers[resource.logical_id] = JwtAuthorizer(resource.logical_id, audiences, header)

        routes: dict[str, RouteAuthorization] = {}
        for resource in present:
            # A route of a WebSocket API is not an HTTP route (an API the template does not name counts as HTTP).
            if resource.type != "AWS::ApiGatewayV2::Route" or _api_id(resource.properties) in other_apis:
                continue
            props = _resolved(resolver, resource.properties)
            kind = str(props.get("AuthorizationType", "NONE")).upper()
            authorizer_id = props.get("AuthorizerId")
            authorizer = authorizers.get(str(authorizer_id)) if authorizer_id is not None else None
            if kind == "JWT" and authorizer is None:
                # A JWT route whose authorizer is not in the template: tokens of the local issuer for
                # any audience would be wrong; the route refuses every request (as an unverifiable one).
                authorizer = JwtAuthorizer(str(authorizer_id or "missing"), ())
            routes[str(props["RouteKey"])] = RouteAuthorization(
                authorization_type=kind,
                authorizer=authorizer if kind == "JWT" else None,
                scopes=tuple(str(s) for s in props.get("AuthorizationScopes") or []),
            )

        cors: CorsPolicy | None = None
        for api in http_apis.values():
            configuration = _resolved(resolver, api.properties).get("CorsConfiguration")
            if isinstance(configuration, dict):
                cors = CorsPolicy(
                    allow_origins=_strings(configuration.get("AllowOrigins")),
                    allow_methods=_strings(configuration.get("AllowMethods")),
                    allow_headers=_strings(configuration.get("AllowHeaders")),
                    expose_headers=_strings(configuration.get("ExposeHeaders")),
                    max_age=int(configuration["MaxAge"]) if configuration.get("MaxAge") is not None else None,
                    allow_credentials=bool(configuration.get("AllowCredentials", False)),
                )
        return cls(routes=routes, cors=cors)


def _api_id(properties: Mapping[str, Any]) -> str | None:
    """The logical id of the route's API (``Ref`` or ``Fn::GetAtt [Api, ApiId]``), if it names one."""
    api = properties.get("ApiId")
    if isinstance(api, dict) and "Ref" in api:
        return str(api["Ref"])
    if isinstance(api, dict) and isinstance(api.get("Fn::GetAtt"), list) and api["Fn::GetAtt"]:
        return str(api["Fn::GetAtt"][0])
    return None


def _resolved(resolver: IntrinsicResolver, properties: Mapping[str, Any]) -> dict[str, Any]:
    resolved = resolver.resolve(dict(properties))
    return resolved if isinstance(resolved, dict) else {}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value or [])
