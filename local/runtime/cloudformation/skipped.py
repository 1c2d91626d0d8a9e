"""The resources the local stack does not create, why, and the placeholders their references get.

:func:`skip_reason` decides per resource; a skipped resource's ``Ref`` and ``Fn::GetAtt`` resolve
to recognisable placeholders (:class:`PlaceholderAttributes`), never to real-looking values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from local.runtime.cloudformation.apigateway import is_websocket_api_part
from local.runtime.cloudformation.events import is_queue_rule
from local.runtime.cloudformation.lambda_ import function_skip_reason, is_stream_mapping
from local.runtime.cloudformation.template import CloudFormationTemplate, TemplateResource

# Types the local stack does not create, and why (listed at startup).
SKIP_REASONS: dict[str, str] = {
    "AWS::Logs::LogGroup": "log output goes to the stack log",
    "AWS::CloudWatch::Alarm": "moto stores alarms but never evaluates them",
    "AWS::CloudWatch::Dashboard": "not needed locally",
    "AWS::SNS::Topic": "alarm notifications are not delivered locally",
    "AWS::SNS::Subscription": "alarm notifications are not delivered locally",
    "AWS::Cognito::UserPool": "the local identity provider issues the tokens",
    "AWS::Cognito::UserPoolClient": "the local identity provider issues the tokens",
    "AWS::Cognito::UserPoolDomain": "the local identity provider issues the tokens",
    "AWS::ApiGatewayV2::Api": "served by the local API adapter",
    "AWS::ApiGatewayV2::Route": "served by the local API adapter",
    "AWS::ApiGatewayV2::Integration": "served by the local API adapter",
    "AWS::ApiGatewayV2::Stage": "served by the local API adapter",
    "AWS::ApiGatewayV2::Authorizer": "the local API adapter verifies tokens as it does",
    "AWS::OpenSearchService::Domain": "the local OpenSearch (OPENSEARCH_URL) replaces it",
    "AWS::KMS::Key": "moto does not enforce encryption keys",
    "AWS::KMS::Alias": "moto does not enforce encryption keys",
    "AWS::Lambda::LayerVersion": "the runner uses the layer's source dir",
    "AWS::Lambda::Permission": "moto does not enforce resource policies",
    "AWS::Lambda::EventSourceMapping": "run by the local SQS poller (moto's trigger deletes failed messages)",
    "AWS::IAM::Policy": "moto does not enforce IAM",
    "AWS::IAM::ManagedPolicy": "moto does not enforce IAM",
    "AWS::SQS::QueuePolicy": "moto does not enforce resource policies",
    "AWS::S3::BucketPolicy": "moto does not enforce resource policies",
    "AWS::CDK::Metadata": "CDK bookkeeping",
    "AWS::CloudFormation::CustomResource": "custom resource providers do not run locally",
    "AWS::Events::Rule": "schedules and rules are not run locally",
    "AWS::Scheduler::Schedule": "schedules are not run locally",
    "AWS::CloudFront::Distribution": "the local API adapter serves web/",
    "AWS::CloudFront::OriginAccessControl": "the local API adapter serves web/",
    "AWS::CloudFront::ResponseHeadersPolicy": "the local API adapter serves web/",
    "Custom::CDKBucketDeployment": "the local API adapter serves web/ and generates config.json",
}
# The live-status WebSocket API and its stream mapping are read and served by local/runtime/http.
WEBSOCKET_SKIP_REASON = "WebSocket API: served by the local API adapter (/_local/live)"
DYNAMODB_STREAM_MAPPING_REASON = "DynamoDB stream mapping (the live-status pusher): run by the local stream poller"

# Placeholder attribute values of skipped resources whose shape matters to a consumer.
_PLACEHOLDER_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("AWS::CloudFront::Distribution", "DomainName"): "{id}.cloudfront.net",
    ("AWS::OpenSearchService::Domain", "DomainEndpoint"): "{id}.{region}.es.amazonaws.com",
    ("AWS::OpenSearchService::Domain", "DomainArn"): "arn:aws:es:{region}:{account}:domain/{id}",
    ("AWS::Cognito::UserPool", "ProviderURL"): "cognito-idp.{region}.amazonaws.com/{id}",
    # An HTTP API's (the template uses no WebSocket API's): outputs and environments localize it.
    ("AWS::ApiGatewayV2::Api", "ApiEndpoint"): "https://{id}.execute-api.{region}.amazonaws.com",
}
# Placeholder Ref values of skipped resources whose Ref is an ARN in CloudFormation.
_PLACEHOLDER_REFS: dict[str, str] = {
    "AWS::SNS::Topic": "arn:aws:sns:{region}:{account}:{id}",
    "AWS::StepFunctions::Activity": "arn:aws:states:{region}:{account}:activity:{id}",
}


def skip_reason(
    resource: TemplateResource,
    template: CloudFormationTemplate,
    creatable_types: Collection[str],
    custom_resource_functions: set[str],
) -> str | None:
    """Why ``resource`` is not created locally; None when a provisioner creates it."""
    if is_websocket_api_part(resource, template):
        return WEBSOCKET_SKIP_REASON
    if resource.type == "AWS::Lambda::EventSourceMapping" and is_stream_mapping(resource):
        return DYNAMODB_STREAM_MAPPING_REASON
    if resource.type == "AWS::Events::Rule" and not is_queue_rule(resource, template):
        return SKIP_REASONS[resource.type]
    if resource.type == "AWS::Lambda::Function":
        return function_skip_reason(resource, template, custom_resource_functions)
    if resource.type in creatable_types:
        return None
    if resource.type in SKIP_REASONS:
        return SKIP_REASONS[resource.type]
    if resource.type.startswith("Custom::"):
        return "custom resource providers do not run locally"
    return "not used by the local stack"


def placeholder_ref(resource: TemplateResource, region: str, account_id: str) -> str:
    """A skipped resource's ``Ref``: an ARN where CloudFormation's is one, else its logical id."""
    ref_format = _PLACEHOLDER_REFS.get(resource.type, "{id}")
    return ref_format.format(id=resource.logical_id, region=region, account=account_id)


class AnyAttributes(Mapping[str, Any]):
    """``Fn::GetAtt`` values computed on demand: every attribute name is present, none is listed."""

    def __getitem__(self, attribute: str) -> Any:
        raise NotImplementedError

    def __contains__(self, attribute: object) -> bool:
        return isinstance(attribute, str)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class PlaceholderAttributes(AnyAttributes):
    """Any attribute of a skipped resource: a recognisable placeholder, not a real value."""

    def __init__(self, resource: TemplateResource, region: str, account_id: str) -> None:
        self._resource = resource
        self._region = region
        self._account_id = account_id

    def __getitem__(self, attribute: str) -> Any:
        fields = {"id": self._resource.logical_id, "region": self._region, "account": self._account_id}
        known = _PLACEHOLDER_ATTRIBUTES.get((self._resource.type, attribute))
        if known is not None:
            return known.format(**fields)
        if attribute == "Arn" or attribute.endswith("Arn"):
            service = self._resource.type.split("::")[1].lower() if "::" in self._resource.type else "local"
            return f"arn:aws:{service}:{self._region}:{self._account_id}:{self._resource.logical_id}"
        return f"{self._resource.logical_id}.{attribute}"
