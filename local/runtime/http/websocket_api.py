"""What the local live channel reads from the template: the WebSocket API and the stream mapping.

:class:`WebSocketApiDefinition`: the ``WEBSOCKET`` API's routes (route key -> integration
function), the ``$connect`` REQUEST authorizer (function, identity sources), stage and route
selection expression. :class:`StreamMapping`: the ``AWS::Lambda::EventSourceMapping`` on a table's
stream (the live-status pusher). :func:`localized_environment`: a function's environment with the
AWS endpoints the local stack replaces (the user pool's issuer, the stage's callback URL, the HTTP
API's URL the MCP function names itself by) pointing at their stand-ins. Imports the template
reader only. Rationale: docs/local-stack.md, "Live status".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver, TemplateResource

_FUNCTION_IN_URI = re.compile(r"arn:aws[a-z-]*:lambda:[^:]+:\d+:function:([A-Za-z0-9_-]+)")
_COGNITO_ISSUER = re.compile(r"^https://cognito-idp\.[a-z0-9-]+\.amazonaws\.com/[^/]+$")
_HTTP_API_URL = re.compile(r"^https://[^/]+\.execute-api\.[^/]+\.amazonaws\.com(?P<path>/.*)?$")
QUERY_SOURCE = "route.request.querystring."
HEADER_SOURCE = "route.request.header."


@dataclass(frozen=True)
class WebSocketAuthorizer:
    """A REQUEST authorizer: its function, and the identity sources a request must carry."""

    function_name: str
    identity_sources: tuple[str, ...] = ()

    def has_identity(self, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
        """API Gateway answers 401 without calling the authorizer when a source is missing or empty."""
        for source in self.identity_sources:
            if source.startswith(QUERY_SOURCE) and not query.get(source.removeprefix(QUERY_SOURCE)):
                return False
            if source.startswith(HEADER_SOURCE) and not headers.get(source.removeprefix(HEADER_SOURCE).lower()):
                return False
        return True


@dataclass(frozen=True)
class WebSocketRoute:
    route_key: str
    function_name: str | None
    authorizer: WebSocketAuthorizer | None = None


@dataclass(frozen=True)
class WebSocketApiDefinition:
    api_id: str
    stage: str
    route_selection_expression: str = "$request.body.action"
    routes: Mapping[str, WebSocketRoute] = field(default_factory=dict)

    def callback_url(self, region: str, url_suffix: str = "amazonaws.com") -> str:
        """The stage's management endpoint in AWS (what the pusher's environment names)."""
        return f"https://{self.api_id}.execute-api.{region}.{url_suffix}/{self.stage}"

    @classmethod
    def from_template(
        cls, template: CloudFormationTemplate, resolver: IntrinsicResolver
    ) -> WebSocketApiDefinition | None:
        """The template's first WebSocket API, or None when it has none."""
        present = [r for r in template.resources.values() if r.condition is None or resolver.condition(r.condition)]
        apis = [
            r
            for r in present
            if r.type == "AWS::ApiGatewayV2::Api" and str(r.properties.get("ProtocolType", "")).upper() == "WEBSOCKET"
        ]
        if not apis:
            return None
        api = apis[0]
        parts = [r for r in present if _api_of(r) == api.logical_id]
        integrations = {
            r.logical_id: _resolved(resolver, r.properties) for r in parts if r.type.endswith("Integration")
        }
        authorizers = {
            r.logical_id: _authorizer(_resolved(resolver, r.properties))
            for r in parts
            if r.type == "AWS::ApiGatewayV2::Authorizer"
        }
        routes: dict[str, WebSocketRoute] = {}
        for resource in (r for r in parts if r.type == "AWS::ApiGatewayV2::Route"):
            props = _resolved(resolver, resource.properties)
            integration = integrations.get(str(props.get("Target", "")).removeprefix("integrations/"), {})
            authorizer = authorizers.get(str(props.get("AuthorizerId", "")))
            key = str(props["RouteKey"])
            routes[key] = WebSocketRoute(key, _function(integration.get("IntegrationUri")), authorizer)
        stages = [_resolved(resolver, r.properties) for r in parts if r.type == "AWS::ApiGatewayV2::Stage"]
        api_props = _resolved(resolver, api.properties)
        return cls(
            api_id=str(resolver.resolve({"Ref": api.logical_id})),
            stage=str(stages[0].get("StageName", "$default")) if stages else "$default",
            route_selection_expression=str(api_props.get("RouteSelectionExpression", "$request.body.action")),
            routes=routes,
        )


@dataclass(frozen=True)
class StreamMapping:
    """The template's event source mapping on a DynamoDB stream, as the local poller runs it."""

    logical_id: str
    stream_arn: str
    function_name: str
    batch_size: int = 100
    report_batch_item_failures: bool = False
    # -1: retried until the record expires (AWS's default); the poller then retries without end.
    maximum_retry_attempts: int = -1
    filter_patterns: tuple[Mapping[str, Any], ...] = ()
    on_failure_arn: str | None = None

    def accepts(self, record: Mapping[str, Any]) -> bool:
        """Whether the record passes the mapping's ``FilterCriteria`` (any pattern; none: all pass)."""
        return not self.filter_patterns or any(_matches(pattern, record) for pattern in self.filter_patterns)

    @classmethod
    def from_template(cls, template: CloudFormationTemplate, resolver: IntrinsicResolver) -> list[StreamMapping]:
        mappings = []
        for resource in template.resources.values():
            if resource.type != "AWS::Lambda::EventSourceMapping" or not _reads_a_stream(resource):
                continue
            if resource.condition is not None and not resolver.condition(resource.condition):
                continue
            props = _resolved(resolver, resource.properties)
            filters = (props.get("FilterCriteria") or {}).get("Filters") or []
            on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            mappings.append(
                cls(
                    logical_id=resource.logical_id,
                    stream_arn=str(props["EventSourceArn"]),
                    function_name=_function(props["FunctionName"]) or str(props["FunctionName"]),
                    batch_size=int(props.get("BatchSize", 100)),
                    report_batch_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                    maximum_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
                    filter_patterns=tuple(json.loads(f["Pattern"]) for f in filters if f.get("Pattern")),
                    on_failure_arn=str(on_failure) if on_failure else None,
                )
            )
        return mappings


def localized_environment(
    environment: Mapping[str, str],
    *,
    issuer: str,
    websocket: WebSocketApiDefinition | None,
    region: str,
    live_url: str,
    api_url: str | None = None,
) -> dict[str, str]:
    """``environment`` with the user pool's issuer, the WebSocket stage's callback URL and (given
    ``api_url``) the HTTP API's URLs made local."""
    callback = websocket.callback_url(region) if websocket is not None else None
    localized = {}
    for name, value in environment.items():
        api_path = _HTTP_API_URL.match(value)
        if _COGNITO_ISSUER.match(value):
            value = issuer
        elif callback is not None and value == callback:
            value = live_url
        elif api_url is not None and api_path is not None:
            value = api_url.rstrip("/") + (api_path.group("path") or "")
        localized[name] = value
    return localized


def _matches(pattern: Mapping[str, Any], value: Any) -> bool:
    """EventBridge-style matching of exact values (the subset Lambda filters here use)."""
    if not isinstance(value, Mapping):
        return False
    for key, expected in pattern.items():
        if isinstance(expected, Mapping):
            if not _matches(expected, value.get(key)):
                return False
        elif value.get(key) not in expected:
            return False
    return True


def _authorizer(props: Mapping[str, Any]) -> WebSocketAuthorizer | None:
    function = _function(props.get("AuthorizerUri"))
    if function is None:
        return None
    return WebSocketAuthorizer(function, tuple(str(s) for s in props.get("IdentitySource") or []))


def _function(uri: Any) -> str | None:
    found = _FUNCTION_IN_URI.search(str(uri or ""))
    return found.group(1) if found else None


def _reads_a_stream(resource: TemplateResource) -> bool:
    source = resource.properties.get("EventSourceArn")
    if isinstance(source, dict) and "Fn::GetAtt" in source:
        target = source["Fn::GetAtt"]
        return (target[1] if isinstance(target, list) else str(target).partition(".")[2]) == "StreamArn"
    return isinstance(source, str) and ":dynamodb:" in source and "/stream/" in source


def _api_of(resource: TemplateResource) -> str | None:
    api = resource.properties.get("ApiId")
    return str(api["Ref"]) if isinstance(api, dict) and "Ref" in api else None


def _resolved(resolver: IntrinsicResolver, properties: Mapping[str, Any]) -> dict[str, Any]:
    resolved = resolver.resolve(dict(properties))
    return resolved if isinstance(resolved, dict) else {}
