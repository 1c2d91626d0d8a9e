"""Create the template's resources in moto, with the template's own properties.

Nothing here holds a second copy of a resource setting: queue redrive, visibility timeout,
table keys, function timeout and environment, the state machine definition and the event
source mappings are all read from the synthesized template. The only local deviations are
the Step Functions retry interval scale (``LOCAL_RETRY_SCALE``) and the Lambda environment
overrides in ``settings.local_lambda_overrides``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_ingest.core.job import LANE_TAG

from local.runtime.aws import moto_client
from local.runtime.cloudformation.template import (
    CloudFormationTemplate,
    IntrinsicResolver,
    TemplateError,
    TemplateResource,
    dependency_order,
    generated_physical_name,
)
from local.runtime.settings import LIVE_PATH, RuntimeSettings

LOG = logging.getLogger("local.runtime.cloudformation.provision")

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
_WEBSOCKET_API_PARTS = (
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Stage",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::ApiGatewayV2::Deployment",
    "AWS::ApiGatewayV2::RouteResponse",
    "AWS::ApiGatewayV2::IntegrationResponse",
)
DYNAMODB_STREAM_MAPPING_REASON = "DynamoDB stream mapping (the live-status pusher): run by the local stream poller"

# Placeholder attribute values of skipped resources whose shape matters to a consumer.
_PLACEHOLDER_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("AWS::CloudFront::Distribution", "DomainName"): "{id}.cloudfront.net",
    ("AWS::OpenSearchService::Domain", "DomainEndpoint"): "{id}.{region}.es.amazonaws.com",
    ("AWS::OpenSearchService::Domain", "DomainArn"): "arn:aws:es:{region}:{account}:domain/{id}",
    ("AWS::Cognito::UserPool", "ProviderURL"): "cognito-idp.{region}.amazonaws.com/{id}",
}
# Placeholder Ref values of skipped resources whose Ref is an ARN in CloudFormation.
_PLACEHOLDER_REFS: dict[str, str] = {
    "AWS::SNS::Topic": "arn:aws:sns:{region}:{account}:{id}",
    "AWS::StepFunctions::Activity": "arn:aws:states:{region}:{account}:activity:{id}",
}
_LAMBDA_ARN_IN_URI = re.compile(r"arn:aws[a-z-]*:lambda:[^:]+:\d+:function:([A-Za-z0-9_-]+)")
_API_DOMAIN = re.compile(r"^https://[^/]+\.execute-api\.[^/]+\.amazonaws\.com(?P<path>/.*)?$")
_WEBSOCKET_DOMAIN = re.compile(r"^wss://[^/]+\.execute-api\.[^/]+\.amazonaws\.com(/.*)?$")
_CLOUDFRONT_DOMAIN = re.compile(r"^https://[^/]+\.cloudfront\.net(?P<path>/.*)?$")
_OPENSEARCH_DOMAIN = re.compile(r"^(https://)?[^/]+\.es\.amazonaws\.com(?P<path>/.*)?$")


class ProvisioningError(Exception):
    """The template asks for something the local stack cannot provide."""


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


class _PlaceholderAttributes(AnyAttributes):
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


@dataclass(frozen=True)
class FunctionDefinition:
    """What the Lambda runner needs to run one function of the template."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    code_dir: Path
    timeout_seconds: int
    memory_mb: int
    environment: Mapping[str, str]
    cdk_path: str | None = None
    reserved_concurrency: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def lane(self) -> str | None:
        """The workflow lane of a stage function (its ``rag-ingest:lane`` tag), None for the others."""
        return self.tags.get(LANE_TAG)

    @property
    def display_name(self) -> str:
        """A readable name for logs: the construct path without stack and ``/Resource``."""
        if self.cdk_path:
            parts = [part for part in self.cdk_path.split("/")[1:] if part != "Resource"]
            if parts:
                return "/".join(parts)
        return self.logical_id

    def aliases(self) -> set[str]:
        """Names a test may use for this function (fault injection)."""
        names = {self.name, self.logical_id, self.arn, self.display_name}
        names.add(re.sub(r"[0-9A-F]{8}$", "", self.logical_id))
        if self.cdk_path:
            names.add(self.cdk_path)
            names.add(self.cdk_path.removesuffix("/Resource"))
            names.add(self.display_name.split("/")[-1])
        return {name for name in names if name}


@dataclass(frozen=True)
class EventSourceMapping:
    logical_id: str
    queue_arn: str
    queue_url: str
    function_name: str
    batch_size: int
    batching_window_seconds: int
    report_batch_item_failures: bool
    maximum_concurrency: int | None
    enabled: bool


@dataclass(frozen=True)
class ApiRoute:
    route_key: str
    method: str  # "ANY" matches every method
    path_template: str | None  # None: the $default route
    function_name: str
    requires_jwt: bool


@dataclass
class ProvisionedStack:
    stack_name: str
    physical_ids: dict[str, Any] = field(default_factory=dict)
    functions: list[FunctionDefinition] = field(default_factory=list)
    event_source_mappings: list[EventSourceMapping] = field(default_factory=list)
    api_routes: list[ApiRoute] = field(default_factory=list)
    state_machines: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def function_named(self, name: str) -> FunctionDefinition | None:
        return next((function for function in self.functions if function.name == name), None)

    @property
    def api_function_names(self) -> frozenset[str]:
        """The functions behind the HTTP API's routes: a person waits on each of their invocations."""
        return frozenset(route.function_name for route in self.api_routes)


def scale_retry_intervals(definition: dict[str, Any], scale: float) -> dict[str, Any]:
    """A copy of an ASL definition with every Retry's waits scaled (never its attempts).

    ``IntervalSeconds`` and ``MaxDelaySeconds`` must stay integers >= 1 in ASL, so the scaled
    value is rounded and floored at 1. MaxAttempts, BackoffRate, JitterStrategy and the
    retriers themselves are left exactly as synthesized.
    """
    # A JSON round trip, not deepcopy: shared sub-objects must not be scaled twice.
    scaled: dict[str, Any] = json.loads(json.dumps(definition))

    def scale_seconds(value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(1, round(value * scale))
        return value

    def visit_states(states: Any) -> None:
        if not isinstance(states, dict):
            return
        for state in states.values():
            if not isinstance(state, dict):
                continue
            for retrier in state.get("Retry", []) or []:
                for key in ("IntervalSeconds", "MaxDelaySeconds"):
                    if key in retrier:
                        retrier[key] = scale_seconds(retrier[key])
            for nested_key in ("ItemProcessor", "Iterator"):
                nested = state.get(nested_key)
                if isinstance(nested, dict):
                    visit_states(nested.get("States"))
            for branch in state.get("Branches", []) or []:
                if isinstance(branch, dict):
                    visit_states(branch.get("States"))

    visit_states(scaled.get("States"))
    return scaled


def _dummy_zip() -> bytes:
    # moto wants a code package; the runner runs the real code from the asset dir.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "Local stack placeholder: the local Lambda runner runs the CDK asset.\n")
    return buffer.getvalue()


def _attribute_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class Provisioner:
    """Creates the template's resources in moto's server and records what the runtime needs."""

    def __init__(self, template: CloudFormationTemplate, settings: RuntimeSettings) -> None:
        self.template = template
        self.settings = settings
        self.resolver = IntrinsicResolver(
            template,
            region=settings.region,
            account_id=settings.account_id,
            stack_name=settings.stack_name,
        )
        self.stack = ProvisionedStack(stack_name=settings.stack_name)
        self._clients: dict[str, Any] = {}
        self._queue_urls_by_arn: dict[str, str] = {}
        self._creators: dict[str, Callable[[TemplateResource], None]] = {
            "AWS::IAM::Role": self._create_role,
            "AWS::S3::Bucket": self._create_bucket,
            "AWS::SQS::Queue": self._create_queue,
            "AWS::DynamoDB::Table": self._create_table,
            "AWS::DynamoDB::GlobalTable": self._create_table,
            "AWS::Events::EventBus": self._create_event_bus,
            "AWS::Events::Rule": self._create_rule,
            "AWS::Lambda::Function": self._create_function,
            "AWS::StepFunctions::StateMachine": self._create_state_machine,
            "Custom::S3BucketNotifications": self._apply_bucket_notifications,
        }

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = moto_client(self.settings, service)
        return self._clients[service]

    # -- entry point --------------------------------------------------------------------------

    def provision(self) -> ProvisionedStack:
        present = [
            r for r in self.template.resources.values() if r.condition is None or self.resolver.condition(r.condition)
        ]
        custom_resource_functions = self._custom_resource_provider_functions(present)
        to_create: list[str] = []
        for resource in present:
            reason = self._skip_reason(resource, custom_resource_functions)
            if reason is None:
                to_create.append(resource.logical_id)
            else:
                self.stack.skipped.setdefault(f"{resource.type} ({reason})", []).append(resource.logical_id)
                ref_format = _PLACEHOLDER_REFS.get(resource.type, "{id}")
                self.resolver.set_resource(
                    resource.logical_id,
                    ref_format.format(
                        id=resource.logical_id, region=self.settings.region, account=self.settings.account_id
                    ),
                    _PlaceholderAttributes(resource, self.settings.region, self.settings.account_id),
                )
        for logical_id in dependency_order(self.template, to_create):
            resource = self.template.resources[logical_id]
            try:
                self._creators[resource.type](resource)
            except TemplateError as exc:
                raise type(exc)(f"{resource.type} {logical_id}: {exc}") from exc
            except ProvisioningError:
                raise
            except Exception as exc:
                raise ProvisioningError(f"creating {resource.type} {logical_id} in moto failed: {exc}") from exc
        self.stack.event_source_mappings = [
            self._read_event_source_mapping(resource)
            for resource in present
            if resource.type == "AWS::Lambda::EventSourceMapping" and not self._is_stream_mapping(resource)
        ]
        self.stack.api_routes = self._read_api_routes(present)
        self.stack.outputs = self._resolve_outputs()
        return self.stack

    def _websocket_api_ids(self) -> set[str]:
        return {
            r.logical_id
            for r in self.template.resources.values()
            if r.type == "AWS::ApiGatewayV2::Api" and str(r.properties.get("ProtocolType", "")).upper() == "WEBSOCKET"
        }

    def _is_websocket_api_part(self, resource: TemplateResource) -> bool:
        if resource.type == "AWS::ApiGatewayV2::Api":
            return resource.logical_id in self._websocket_api_ids()
        if resource.type in _WEBSOCKET_API_PARTS:
            api_id = resource.properties.get("ApiId")
            return isinstance(api_id, dict) and api_id.get("Ref") in self._websocket_api_ids()
        return False

    def _is_stream_mapping(self, resource: TemplateResource) -> bool:
        # The source is a table's StreamArn (Fn::GetAtt [Table, StreamArn]) or a literal stream ARN.
        source = resource.properties.get("EventSourceArn")
        if isinstance(source, dict) and "Fn::GetAtt" in source:
            target = source["Fn::GetAtt"]
            attribute = target[1] if isinstance(target, list) else str(target).partition(".")[2]
            return attribute == "StreamArn"
        return isinstance(source, str) and ":dynamodb:" in source and "/stream/" in source

    def _skip_reason(self, resource: TemplateResource, custom_resource_functions: set[str]) -> str | None:
        if self._is_websocket_api_part(resource):
            return WEBSOCKET_SKIP_REASON
        if resource.type == "AWS::Lambda::EventSourceMapping" and self._is_stream_mapping(resource):
            return DYNAMODB_STREAM_MAPPING_REASON
        if resource.type == "AWS::Events::Rule" and not self._is_queue_rule(resource):
            return SKIP_REASONS[resource.type]
        if resource.type == "AWS::Lambda::Function":
            if resource.logical_id in custom_resource_functions:
                return "custom resource provider: does not run locally"
            runtime = str(resource.properties.get("Runtime", ""))
            if not runtime.startswith("python"):
                return f"runtime {runtime or 'container image'}: the local runner runs Python only"
            if self.template.asset_dir(resource) is None:
                return "no CDK code asset: inline or external code does not run locally"
            return None
        if resource.type in self._creators:
            return None
        if resource.type in SKIP_REASONS:
            return SKIP_REASONS[resource.type]
        if resource.type.startswith("Custom::"):
            return "custom resource providers do not run locally"
        return "not used by the local stack"

    def _custom_resource_provider_functions(self, resources: list[TemplateResource]) -> set[str]:
        providers: set[str] = set()
        for resource in resources:
            if resource.type.startswith("Custom::") or resource.type == "AWS::CloudFormation::CustomResource":
                token = resource.properties.get("ServiceToken")
                if isinstance(token, dict) and "Fn::GetAtt" in token:
                    target = token["Fn::GetAtt"]
                    providers.add(target.split(".")[0] if isinstance(target, str) else target[0])
        return providers

    def _physical_name(
        self, resource: TemplateResource, property_name: str, max_length: int, lowercase: bool = False
    ) -> str:
        explicit = resource.properties.get(property_name)
        if explicit is not None:
            return str(self.resolver.resolve(explicit))
        return generated_physical_name(
            self.settings.stack_name, resource.logical_id, max_length=max_length, lowercase=lowercase
        )

    def _props(self, resource: TemplateResource) -> dict[str, Any]:
        resolved = self.resolver.resolve(dict(resource.properties))
        return resolved if isinstance(resolved, dict) else {}

    def _arn(self, service: str, resource_part: str, *, regional: bool = True, with_account: bool = True) -> str:
        region = self.settings.region if regional else ""
        account = self.settings.account_id if with_account else ""
        return f"arn:aws:{service}:{region}:{account}:{resource_part}"

    # -- creators -----------------------------------------------------------------------------

    def _create_role(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = self._physical_name(resource, "RoleName", 64)
        response = self.client("iam").create_role(
            RoleName=name,
            Path=props.get("Path", "/"),
            AssumeRolePolicyDocument=json.dumps(props.get("AssumeRolePolicyDocument", {})),
        )
        role = response["Role"]
        self.resolver.set_resource(resource.logical_id, name, {"Arn": role["Arn"], "RoleId": role["RoleId"]})
        self.stack.physical_ids[resource.logical_id] = name

    def _local_page_origins(self) -> list[str]:
        """Where the local API server serves the page (by address and by name)."""
        return list(dict.fromkeys([self.settings.api_url, f"http://localhost:{self.settings.api_port}"]))

    def _create_bucket(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = self._physical_name(resource, "BucketName", 63, lowercase=True)
        s3 = self.client("s3")
        if self.settings.region == "us-east-1":
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": self.settings.region})
        versioning = props.get("VersioningConfiguration")
        if versioning:
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning["Status"]})
        cors = props.get("CorsConfiguration")
        if cors:
            rules = []
            for rule in cors.get("CorsRules", []):
                converted: dict[str, Any] = {
                    "AllowedMethods": rule["AllowedMethods"],
                    # The page is served by the local API server (as by CloudFront in AWS, whose URL the
                    # template allows): its origin must be allowed to POST uploads from a browser.
                    "AllowedOrigins": [*rule["AllowedOrigins"], *self._local_page_origins()],
                }
                for source, target in (
                    ("AllowedHeaders", "AllowedHeaders"),
                    ("ExposedHeaders", "ExposeHeaders"),
                    ("Id", "ID"),
                    ("MaxAge", "MaxAgeSeconds"),
                ):
                    if source in rule:
                        converted[target] = rule[source]
                rules.append(converted)
            s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": rules})
        encryption = props.get("BucketEncryption")
        if encryption:
            rules = []
            for rule in encryption["ServerSideEncryptionConfiguration"]:
                # CloudFormation's ServerSideEncryptionByDefault is the API's ApplyServerSideEncryptionByDefault.
                converted_rule = {k: v for k, v in rule.items() if k != "ServerSideEncryptionByDefault"}
                if "ServerSideEncryptionByDefault" in rule:
                    converted_rule["ApplyServerSideEncryptionByDefault"] = rule["ServerSideEncryptionByDefault"]
                rules.append(converted_rule)
            s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules})
        public_access = props.get("PublicAccessBlockConfiguration")
        if public_access:
            s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=public_access)
        if props.get("NotificationConfiguration"):
            self._put_bucket_notification_from_bucket_properties(name, props["NotificationConfiguration"])
        self.resolver.set_resource(
            resource.logical_id,
            name,
            {
                "Arn": f"arn:aws:s3:::{name}",
                "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{self.settings.region}.amazonaws.com",
                "DualStackDomainName": f"{name}.s3.dualstack.{self.settings.region}.amazonaws.com",
                "WebsiteURL": f"http://{name}.s3-website-{self.settings.region}.amazonaws.com",
            },
        )
        self.stack.physical_ids[resource.logical_id] = name

    def _put_bucket_notification_from_bucket_properties(self, bucket: str, config: dict[str, Any]) -> None:
        # The bucket's own NotificationConfiguration property uses CloudFormation's shape.
        converted: dict[str, Any] = {}
        for source, target, arn_key, cfn_arn_key in (
            ("QueueConfigurations", "QueueConfigurations", "QueueArn", "Queue"),
            ("TopicConfigurations", "TopicConfigurations", "TopicArn", "Topic"),
            ("LambdaConfigurations", "LambdaFunctionConfigurations", "LambdaFunctionArn", "Function"),
        ):
            items = []
            for item in config.get(source, []):
                entry: dict[str, Any] = {"Events": [item["Event"]], arn_key: item[cfn_arn_key]}
                rules = item.get("Filter", {}).get("S3Key", {}).get("Rules")
                if rules:
                    entry["Filter"] = {"Key": {"FilterRules": rules}}
                items.append(entry)
            if items:
                converted[target] = items
        if "EventBridgeConfiguration" in config:
            converted["EventBridgeConfiguration"] = {}
        self.client("s3").put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=converted)

    def _apply_bucket_notifications(self, resource: TemplateResource) -> None:
        # CDK's Custom::S3BucketNotifications carries the S3 API's own shape.
        props = self._props(resource)
        bucket = props["BucketName"]
        configuration = props.get("NotificationConfiguration", {}) or {}
        self.client("s3").put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=configuration)
        self.resolver.set_resource(resource.logical_id, f"{bucket}-notifications", {})
        self.stack.physical_ids[resource.logical_id] = f"{bucket}-notifications"

    def _create_queue(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        fifo = bool(props.get("FifoQueue"))
        default_name = generated_physical_name(
            self.settings.stack_name, resource.logical_id, max_length=75 if fifo else 80
        )
        name = str(props.get("QueueName") or (f"{default_name}.fifo" if fifo else default_name))
        attribute_names = (
            "DelaySeconds",
            "MaximumMessageSize",
            "MessageRetentionPeriod",
            "ReceiveMessageWaitTimeSeconds",
            "VisibilityTimeout",
            "RedrivePolicy",
            "RedriveAllowPolicy",
            "KmsMasterKeyId",
            "KmsDataKeyReusePeriodSeconds",
            "SqsManagedSseEnabled",
            "FifoQueue",
            "ContentBasedDeduplication",
            "DeduplicationScope",
            "FifoThroughputLimit",
        )
        attributes = {key: _attribute_text(props[key]) for key in attribute_names if key in props}
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self._queue_urls_by_arn[arn] = url
        self.resolver.set_resource(resource.logical_id, url, {"Arn": arn, "QueueName": name, "QueueUrl": url})
        self.stack.physical_ids[resource.logical_id] = url

    def _create_table(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = self._physical_name(resource, "TableName", 255)
        request: dict[str, Any] = {
            "TableName": name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
        }
        billing_mode = props.get("BillingMode", "PROVISIONED")
        request["BillingMode"] = billing_mode
        provisioned = props.get("ProvisionedThroughput") or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        if billing_mode == "PROVISIONED":
            request["ProvisionedThroughput"] = provisioned
        indexes = []
        for index in props.get("GlobalSecondaryIndexes", []) or []:
            entry = {key: index[key] for key in ("IndexName", "KeySchema", "Projection") if key in index}
            if billing_mode == "PROVISIONED":
                entry["ProvisionedThroughput"] = index.get("ProvisionedThroughput", provisioned)
            indexes.append(entry)
        if indexes:
            request["GlobalSecondaryIndexes"] = indexes
        local_indexes = props.get("LocalSecondaryIndexes")
        if local_indexes:
            request["LocalSecondaryIndexes"] = local_indexes
        stream = props.get("StreamSpecification")
        if stream and stream.get("StreamViewType"):
            request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
        if "DeletionProtectionEnabled" in props:
            request["DeletionProtectionEnabled"] = bool(props["DeletionProtectionEnabled"])
        dynamodb = self.client("dynamodb")
        description = dynamodb.create_table(**request)["TableDescription"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )
        pitr = props.get("PointInTimeRecoverySpecification") or next(
            (replica.get("PointInTimeRecoverySpecification") for replica in props.get("Replicas", []) or []),
            None,
        )
        if pitr and pitr.get("PointInTimeRecoveryEnabled"):
            dynamodb.update_continuous_backups(
                TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
            )
        attributes = {"Arn": description["TableArn"]}
        if description.get("LatestStreamArn"):
            attributes["StreamArn"] = description["LatestStreamArn"]
        self.resolver.set_resource(resource.logical_id, name, attributes)
        self.stack.physical_ids[resource.logical_id] = name

    def _create_event_bus(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = str(props["Name"])
        arn = self.client("events").create_event_bus(Name=name)["EventBusArn"]
        self.resolver.set_resource(resource.logical_id, name, {"Arn": arn, "Name": name})
        self.stack.physical_ids[resource.logical_id] = name

    def _is_queue_rule(self, resource: TemplateResource) -> bool:
        """An event-pattern rule whose targets are all SQS queues of the template (the webhooks' fan-out):
        moto's EventBridge delivers matching PutEvents to them. Schedules and other targets stay skipped."""
        props = resource.properties
        targets = props.get("Targets") or []
        if "EventPattern" not in props or "ScheduleExpression" in props or not targets:
            return False
        for target in targets:
            arn = target.get("Arn") if isinstance(target, dict) else None
            get_att = arn.get("Fn::GetAtt") if isinstance(arn, dict) else None
            if not (isinstance(get_att, list) and len(get_att) == 2 and get_att[1] == "Arn"):
                return False
            queue = self.template.resources.get(str(get_att[0]))
            if queue is None or queue.type != "AWS::SQS::Queue":
                return False
        return True

    def _create_rule(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = self._physical_name(resource, "Name", 64)
        bus = str(props.get("EventBusName") or "default")
        pattern = props["EventPattern"]
        events = self.client("events")
        arn = events.put_rule(
            Name=name,
            EventBusName=bus,
            EventPattern=pattern if isinstance(pattern, str) else json.dumps(pattern),
            State=str(props.get("State") or "ENABLED"),
        )["RuleArn"]
        targets = [{"Id": str(target["Id"]), "Arn": str(target["Arn"])} for target in props["Targets"]]
        for target in targets:
            if target["Arn"] not in self._queue_urls_by_arn:
                raise ProvisioningError(f"rule {resource.logical_id}: target {target['Arn']} is no queue of the stack")
        events.put_targets(Rule=name, EventBusName=bus, Targets=targets)
        self.resolver.set_resource(resource.logical_id, name, {"Arn": arn})
        self.stack.physical_ids[resource.logical_id] = name

    def _create_function(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        name = self._physical_name(resource, "FunctionName", 64)
        handler = str(props.get("Handler", ""))
        code_dir = self.template.asset_dir(resource)
        if code_dir is None or not code_dir.is_dir():
            raise ProvisioningError(f"function {resource.logical_id}: code asset dir {code_dir} not found")
        module_path = handler.rpartition(".")[0].replace(".", "/")
        if not module_path or not (code_dir / f"{module_path}.py").is_file():
            raise ProvisioningError(
                f"function {resource.logical_id}: handler {handler!r} has no module file in {code_dir}"
            )
        environment = {
            key: _attribute_text(value)
            for key, value in ((props.get("Environment") or {}).get("Variables") or {}).items()
        }
        timeout = int(props.get("Timeout", 3))
        memory = int(props.get("MemorySize", 128))
        response = self.client("lambda").create_function(
            FunctionName=name,
            Runtime=props["Runtime"],
            Role=props["Role"],
            Handler=handler,
            Code={"ZipFile": _dummy_zip()},
            Timeout=timeout,
            MemorySize=memory,
            Environment={"Variables": environment},
            Description=str(props.get("Description", ""))[:256],
        )
        arn = response["FunctionArn"]
        reserved = props.get("ReservedConcurrentExecutions")
        tags = {str(tag["Key"]): _attribute_text(tag["Value"]) for tag in props.get("Tags") or []}
        self.stack.functions.append(
            FunctionDefinition(
                logical_id=resource.logical_id,
                name=name,
                arn=arn,
                handler=handler,
                runtime=str(props["Runtime"]),
                code_dir=code_dir,
                timeout_seconds=timeout,
                memory_mb=memory,
                environment=environment,
                cdk_path=resource.cdk_path,
                reserved_concurrency=int(reserved) if reserved is not None else None,
                tags=tags,
            )
        )
        self.resolver.set_resource(resource.logical_id, name, {"Arn": arn})
        self.stack.physical_ids[resource.logical_id] = name

    def _create_state_machine(self, resource: TemplateResource) -> None:
        props = self._props(resource)
        if "DefinitionString" in props:
            definition = json.loads(props["DefinitionString"])
        elif "Definition" in props:
            definition = props["Definition"]
        else:
            raise ProvisioningError(f"state machine {resource.logical_id} has no DefinitionString")
        substitutions = props.get("DefinitionSubstitutions") or {}
        if substitutions:
            text = json.dumps(definition)
            for key, value in substitutions.items():
                text = text.replace("${" + key + "}", str(value))
            definition = json.loads(text)
        scaled = scale_retry_intervals(definition, self.settings.retry_scale)
        name = self._physical_name(resource, "StateMachineName", 80)
        request: dict[str, Any] = {
            "name": name,
            "definition": json.dumps(scaled),
            "roleArn": props["RoleArn"],
        }
        if props.get("StateMachineType"):
            request["type"] = props["StateMachineType"]
        arn = self.client("stepfunctions").create_state_machine(**request)["stateMachineArn"]
        self.stack.state_machines[resource.logical_id] = arn
        self.resolver.set_resource(resource.logical_id, arn, {"Arn": arn, "Name": name})
        self.stack.physical_ids[resource.logical_id] = arn

    # -- read, not created --------------------------------------------------------------------

    def _function_name(self, value: Any) -> str:
        text = str(value)
        match = _LAMBDA_ARN_IN_URI.search(text)
        return match.group(1) if match else text

    def _read_event_source_mapping(self, resource: TemplateResource) -> EventSourceMapping:
        props = self._props(resource)
        source_arn = str(props.get("EventSourceArn", ""))
        if source_arn not in self._queue_urls_by_arn:
            raise ProvisioningError(
                f"event source mapping {resource.logical_id}: source {source_arn} is not a provisioned SQS queue "
                "(only SQS sources run locally)"
            )
        if props.get("FilterCriteria"):
            LOG.warning("event source mapping %s: FilterCriteria is not applied locally", resource.logical_id)
        scaling = props.get("ScalingConfig") or {}
        return EventSourceMapping(
            logical_id=resource.logical_id,
            queue_arn=source_arn,
            queue_url=self._queue_urls_by_arn[source_arn],
            function_name=self._function_name(props["FunctionName"]),
            batch_size=int(props.get("BatchSize", 10)),
            batching_window_seconds=int(props.get("MaximumBatchingWindowInSeconds", 0)),
            report_batch_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
            maximum_concurrency=int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None,
            enabled=bool(props.get("Enabled", True)),
        )

    def _read_api_routes(self, present: list[TemplateResource]) -> list[ApiRoute]:
        integrations = {r.logical_id: r for r in present if r.type == "AWS::ApiGatewayV2::Integration"}
        routes: list[ApiRoute] = []
        for resource in present:
            if resource.type != "AWS::ApiGatewayV2::Route" or self._is_websocket_api_part(resource):
                continue
            props = self._props(resource)
            route_key = str(props["RouteKey"])
            target = str(props.get("Target", ""))
            integration_id = target.removeprefix("integrations/")
            integration = integrations.get(integration_id)
            function_name = None
            if integration is not None:
                uri = self.resolver.resolve(integration.properties.get("IntegrationUri"))
                function_name = self._function_name(uri) if uri else None
            if function_name is None or self.stack.function_named(function_name) is None:
                # Integration not resolvable to a local function: the API function serves the route.
                function_name = api_function_name(self.stack)
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

    def _resolve_outputs(self) -> dict[str, Any]:
        outputs: dict[str, Any] = {}
        for key, output in self.template.outputs.items():
            condition = output.get("Condition")
            if condition and not self.resolver.condition(condition):
                continue
            try:
                value = self.resolver.resolve(output.get("Value"))
            except TemplateError as exc:
                raise type(exc)(f"output {key}: {exc}") from exc
            if isinstance(value, str):
                value = self._localize_url(value)
            outputs[key] = value
        return outputs

    def _localize_url(self, value: str) -> str:
        # AWS endpoints of skipped services become their local stand-ins.
        live = _WEBSOCKET_DOMAIN.match(value)
        if live:  # the live-status WebSocket API becomes the local one
            return self.settings.api_url.replace("http://", "ws://", 1) + LIVE_PATH
        for pattern, local in (
            (_API_DOMAIN, self.settings.api_url),
            (_CLOUDFRONT_DOMAIN, self.settings.api_url),
            (_OPENSEARCH_DOMAIN, self.settings.opensearch_url.rstrip("/")),
        ):
            match = pattern.match(value)
            if match:
                return local + (match.group("path") or "")
        return value


def api_function_name(stack: ProvisionedStack) -> str | None:
    """The API function: logical id ``ApiApiFunction*`` or construct path ``.../Api/ApiFunction``."""
    for function in stack.functions:
        if function.logical_id.startswith("ApiApiFunction") or "/Api/ApiFunction" in (function.cdk_path or ""):
            return function.name
    return None
