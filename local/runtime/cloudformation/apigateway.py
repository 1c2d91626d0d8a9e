"""The HTTP API's routes, read from the template (API Gateway itself is the local API adapter).

Each ``AWS::ApiGatewayV2::Route`` of an HTTP API becomes an :class:`ApiRoute` to the local function
its integration names. The WebSocket API and its parts are told apart, to be skipped.
"""

from __future__ import annotations

import logging

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.lambda_ import function_name_of
from local.runtime.cloudformation.provisioned import ApiRoute, api_function_name
from local.runtime.cloudformation.template import CloudFormationTemplate, TemplateResource

LOG = logging.getLogger("local.runtime.cloudformation.provision")

WEBSOCKET_API_PARTS = (
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Stage",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::ApiGatewayV2::Deployment",
    "AWS::ApiGatewayV2::RouteResponse",
    "AWS::ApiGatewayV2::IntegrationResponse",
)


def websocket_api_ids(template: CloudFormationTemplate) -> set[str]:
    return {
        r.logical_id
        for r in template.resources.values()
        if r.type == "AWS::ApiGatewayV2::Api" and str(r.properties.get("ProtocolType", "")).upper() == "WEBSOCKET"
    }


def is_websocket_api_part(resource: TemplateResource, template: CloudFormationTemplate) -> bool:
    """A WebSocket API, or a route, stage, authorizer, ... of one."""
    if resource.type == "AWS::ApiGatewayV2::Api":
        return resource.logical_id in websocket_api_ids(template)
    if resource.type in WEBSOCKET_API_PARTS:
        api_id = resource.properties.get("ApiId")
        return isinstance(api_id, dict) and api_id.get("Ref") in websocket_api_ids(template)
    return False


def read_api_routes(present: list[TemplateResource], context: ProvisioningContext) -> list[ApiRoute]:
    """The HTTP API's routes; a route whose integration names no local function goes to the API function."""
    integrations = {r.logical_id: r for r in present if r.type == "AWS::ApiGatewayV2::Integration"}
    routes: list[ApiRoute] = []
    for resource in present:
        if resource.type != "AWS::ApiGatewayV2::Route" or is_websocket_api_part(resource, context.template):
            continue
        props = context.properties(resource)
        route_key = str(props["RouteKey"])
        integration = integrations.get(str(props.get("Target", "")).removeprefix("integrations/"))
        function_name = None
        if integration is not None:
            uri = context.resolver.resolve(integration.properties.get("IntegrationUri"))
            function_name = function_name_of(uri) if uri else None
        if function_name is None or context.stack.function_named(function_name) is None:
            function_name = api_function_name(context.stack)
        if function_name is None:
            LOG.warning("API route %s: no local Lambda function serves it", route_key)
            continue
        if route_key == "$default":
            method, path = "ANY", None
        else:
            method, _, path = route_key.partition(" ")
        routes.append(
            ApiRoute(
                route_key=route_key,
                method=method.upper(),
                path_template=path or None,
                function_name=function_name,
                requires_jwt=str(props.get("AuthorizationType", "NONE")).upper() == "JWT",
            )
        )
    return routes
