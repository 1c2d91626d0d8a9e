"""Measures what moto's CloudFormation makes of the synthesized template, per resource type.

    .venv/bin/python -m tools.measure_moto_cloudformation [--json]   (from the repository root)

Deploys ``cdk.out/<stack>.template.json`` with ``create_stack`` into a moto server configured as the local
stack's, after what ``cdk deploy`` finds in place (the bootstrap parameter, the file assets), answers
the S3-notification custom resource as CDK's provider does, then reads every resource back and
compares the properties the pipeline depends on with the template's. Verdict per type (``Finding``):
not supported (left out), failed, created wrong (the property named), created, not checked. Imports
``local.runtime``. Why it exists and its last results: docs/local-stack.md (moto's own CloudFormation).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import threading
import urllib.request
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from local.runtime.aws import moto_client
from local.runtime.cloudformation.skipped import AnyAttributes
from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver, TemplateResource
from local.runtime.moto_server import configure_moto, start_moto_server
from local.runtime.settings import RuntimeSettings

BOOTSTRAP_VERSION = "30"
# Assets larger than this (the layer) are uploaded as a placeholder zip: moto only stores code.
PLACEHOLDER_ASSET_BYTES = 5 * 1024 * 1024
NOTIFICATIONS_TYPE = "Custom::S3BucketNotifications"


@dataclass
class Finding:
    logical_id: str
    resource_type: str
    # not supported: moto has no model, so it is left out (create_stack fails on a reference to it);
    # failed: creating it raised (recorded, the deployment goes on); created, wrong; created; not checked
    verdict: str
    detail: list[str] = field(default_factory=list)


# -- deployment -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _zip_dir(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if directory.is_dir() and sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) < (
            PLACEHOLDER_ASSET_BYTES
        ):
            for path in sorted(p for p in directory.rglob("*") if p.is_file()):
                archive.write(path, path.relative_to(directory).as_posix())
        else:
            archive.writestr("PLACEHOLDER.txt", "asset not uploaded: moto only stores Lambda code\n")
    return buffer.getvalue()


def upload_assets(settings: RuntimeSettings, out_dir: Path, stack_name: str) -> None:
    """What ``cdk bootstrap`` and the asset publishing step of ``cdk deploy`` leave in the account."""
    client = moto_client(settings, "ssm")
    client.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value=BOOTSTRAP_VERSION, Type="String")
    s3 = moto_client(settings, "s3")
    manifest = json.loads((out_dir / f"{stack_name}.assets.json").read_text())
    buckets: set[str] = set()
    for asset in manifest.get("files", {}).values():
        for destination in asset["destinations"].values():
            bucket = (
                destination["bucketName"]
                .replace("${AWS::AccountId}", settings.account_id)
                .replace("${AWS::Region}", settings.region)
            )
            if bucket not in buckets:
                s3.create_bucket(Bucket=bucket)
                buckets.add(bucket)
            source = out_dir / asset["source"]["path"]
            body = source.read_bytes() if source.is_file() else _zip_dir(source)
            if len(body) > PLACEHOLDER_ASSET_BYTES:
                body = _zip_dir(Path("/nonexistent"))
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)


def supported_types() -> set[str]:
    from moto.cloudformation.parsing import get_model_map

    return set(get_model_map())


def measurement_template(template: CloudFormationTemplate, supported: set[str]) -> tuple[dict[str, Any], set[str]]:
    """The template without the types moto cannot parse; references to those become placeholders."""
    unsupported = {
        r.logical_id
        for r in template.resources.values()
        if r.type not in supported and not r.type.startswith("Custom::")
    }

    def replace(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"Ref"} and value["Ref"] in unsupported:
                return f"placeholder-{value['Ref']}"
            if set(value) == {"Fn::GetAtt"}:
                target = value["Fn::GetAtt"]
                logical_id, attribute = target if isinstance(target, list) else str(target).split(".", 1)
                if logical_id in unsupported:
                    return f"placeholder-{logical_id}-{attribute}"
            if set(value) == {"Fn::Sub"}:
                text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
                for logical_id in unsupported:
                    text = text.replace("${" + logical_id + "}", f"placeholder-{logical_id}")
                    text = text.replace("${" + logical_id + ".", f"placeholder-{logical_id}-${{")
                return {"Fn::Sub": text if isinstance(value["Fn::Sub"], str) else [text, replace(value["Fn::Sub"][1])]}
            return {key: replace(item) for key, item in value.items()}
        if isinstance(value, list):
            return [replace(item) for item in value]
        return value

    body = json.loads(json.dumps(template.body))
    body["Resources"] = {
        logical_id: replace(resource)
        for logical_id, resource in body["Resources"].items()
        if logical_id not in unsupported
    }
    for resource in body["Resources"].values():
        depends = resource.get("DependsOn")
        if depends:
            kept = [d for d in ([depends] if isinstance(depends, str) else depends) if d not in unsupported]
            resource["DependsOn"] = kept
            if not kept:
                del resource["DependsOn"]
    body["Outputs"] = replace(body.get("Outputs", {}))
    body.pop("Rules", None)  # moto does not evaluate Rules (CDK's bootstrap version check)
    return body, unsupported


class CreationRecorder:
    """Records, per logical id, an exception moto raised creating it (instead of failing the stack)."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def __enter__(self) -> CreationRecorder:
        from moto.cloudformation import parsing

        self._original = parsing.parse_and_create_resource
        recorder = self

        def parse_and_create_resource(logical_id: str, resource_json: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return recorder._original(logical_id, resource_json, *args, **kwargs)
            except Exception as exc:  # the measurement: what moto raised, per resource
                recorder.errors[logical_id] = f"{type(exc).__name__}: {exc}"[:300]
                return None

        parsing.parse_and_create_resource = parse_and_create_resource
        return self

    def __exit__(self, *exc_info: object) -> None:
        from moto.cloudformation import parsing

        parsing.parse_and_create_resource = self._original  # type: ignore[assignment]


def answer_custom_resources(settings: RuntimeSettings) -> Callable[[], None]:
    """moto invokes a custom resource's provider function; answer as CDK's S3-notification provider does."""
    from moto.awslambda.models import LambdaFunction

    original = LambdaFunction._invoke_lambda
    s3 = moto_client(settings, "s3")

    def _invoke_lambda(self: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        request = json.loads(event) if isinstance(event, str) else event
        if not isinstance(request, dict) or "ResponseURL" not in request:
            return json.dumps({"errorType": "Runtime.Unavailable", "errorMessage": "not run"}), True, ""
        properties = request.get("ResourceProperties", {})
        status, reason = "FAILED", "custom resource providers do not run in this measurement"
        if request.get("ResourceType") == NOTIFICATIONS_TYPE:
            s3.put_bucket_notification_configuration(
                Bucket=properties["BucketName"],
                NotificationConfiguration=properties.get("NotificationConfiguration", {}),
            )
            status, reason = "SUCCESS", ""
        answer = {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": request["LogicalResourceId"],
            "StackId": request["StackId"],
            "RequestId": request["RequestId"],
            "LogicalResourceId": request["LogicalResourceId"],
            "Data": {},
        }
        # moto builds the URL for a provider in Docker (host "motoserver"): this one is in-process.
        response_url = urlsplit(str(request["ResponseURL"]))
        url = f"{settings.moto_endpoint}{response_url.path}?{response_url.query}"
        # moto's server picks the service from the signature's credential scope.
        scope = f"Credential=testing/20240101/{settings.region}/cloudformation/aws4_request"
        put = urllib.request.Request(
            url,
            data=json.dumps(answer).encode(),
            method="PUT",
            headers={"Authorization": f"AWS4-HMAC-SHA256 {scope}, SignedHeaders=host, Signature=0"},
        )
        urllib.request.urlopen(put, timeout=10).read()
        return "null", False, ""

    LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]

    def undo() -> None:
        LambdaFunction._invoke_lambda = original  # type: ignore[method-assign]

    return undo


# -- read back ------------------------------------------------------------------------------------


class _PlaceholderAttributes(AnyAttributes):
    """``Fn::GetAtt`` of a resource left out: the same placeholder the measurement template holds."""

    def __init__(self, logical_id: str) -> None:
        self._logical_id = logical_id

    def __getitem__(self, attribute: str) -> Any:
        return f"placeholder-{self._logical_id}-{attribute}"


class _MotoAttributes(AnyAttributes):
    """``Fn::GetAtt`` of a resource moto created, as moto answers it."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getitem__(self, attribute: str) -> Any:
        try:
            return self._model.get_cfn_attribute(attribute)
        except Exception:  # an attribute moto does not model: recognisable, compared like any value
            return f"unmodelled-{attribute}"


def _differences(path: str, expected: Any, actual: Any) -> list[str]:
    """Where ``actual`` lacks or changes what ``expected`` says (extra keys in ``actual`` are fine)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                found.append(f"{path}.{key} missing")
            else:
                found.extend(_differences(f"{path}.{key}", value, actual[key]))
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(actual)} items, template {len(expected)}"]
        return [
            d
            for index, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in _differences(f"{path}[{index}]", e, a)
        ]
    if isinstance(expected, bool) or isinstance(actual, bool):
        same = str(expected).lower() == str(actual).lower()
    elif isinstance(expected, int | float) or isinstance(actual, int | float):
        try:
            same = float(expected) == float(actual)
        except (TypeError, ValueError):
            same = False
    else:
        same = expected == actual
    return [] if same else [f"{path}: {actual!r}, template {expected!r}"[:240]]


class Checker:
    """Reads a created resource back and compares it with the template's resolved properties."""

    def __init__(self, settings: RuntimeSettings, resolver: IntrinsicResolver) -> None:
        self.settings = settings
        self.resolver = resolver
        self._clients: dict[str, Any] = {}
        self.checks: dict[str, Callable[[TemplateResource, str, dict[str, Any]], list[str]]] = {
            "AWS::SQS::Queue": self._queue,
            "AWS::DynamoDB::Table": self._table,
            "AWS::S3::Bucket": self._bucket,
            NOTIFICATIONS_TYPE: self._notifications,
            "AWS::Lambda::Function": self._function,
            "AWS::Lambda::EventSourceMapping": self._mapping,
            "AWS::StepFunctions::StateMachine": self._state_machine,
            "AWS::CloudWatch::Alarm": self._alarm,
            "AWS::SNS::Topic": self._topic,
            "AWS::IAM::Role": self._role,
            "AWS::Events::Rule": self._rule,
            "AWS::Logs::LogGroup": self._log_group,
            "AWS::Lambda::LayerVersion": self._layer,
        }

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = moto_client(self.settings, service)
        return self._clients[service]

    def check(self, resource: TemplateResource, physical_id: str) -> list[str] | None:
        check = self.checks.get(resource.type)
        if check is None:
            return None
        props = self.resolver.resolve(dict(resource.properties))
        try:
            return check(resource, physical_id, props)
        except Exception as exc:  # reading back failed: the resource is not what the template says
            return [f"read back failed: {type(exc).__name__}: {exc}"[:240]]

    def _queue(self, resource: TemplateResource, url: str, props: dict[str, Any]) -> list[str]:
        attributes = self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        found: list[str] = []
        for key in (
            "VisibilityTimeout",
            "MessageRetentionPeriod",
            "DelaySeconds",
            "SqsManagedSseEnabled",
            "KmsMasterKeyId",
        ):
            if key in props:
                found += _differences(key, props[key], attributes.get(key, "<absent>"))
        if "RedrivePolicy" in props:
            actual = json.loads(attributes.get("RedrivePolicy", "{}"))
            found += _differences("RedrivePolicy", props["RedrivePolicy"], actual)
        return found

    def _table(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        dynamodb = self.client("dynamodb")
        table = dynamodb.describe_table(TableName=name)["Table"]
        found = _differences("KeySchema", props["KeySchema"], table["KeySchema"])
        found += _differences(
            "AttributeDefinitions",
            sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
            sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        )
        if "BillingMode" in props:
            found += _differences(
                "BillingMode", props["BillingMode"], table.get("BillingModeSummary", {}).get("BillingMode", "<absent>")
            )
        expected_gsis = {g["IndexName"]: g for g in props.get("GlobalSecondaryIndexes", [])}
        actual_gsis = {g["IndexName"]: g for g in table.get("GlobalSecondaryIndexes", [])}
        for index_name, index in expected_gsis.items():
            if index_name not in actual_gsis:
                found.append(f"GlobalSecondaryIndexes.{index_name} missing")
                continue
            for key in ("KeySchema", "Projection"):
                found += _differences(
                    f"GlobalSecondaryIndexes.{index_name}.{key}", index[key], actual_gsis[index_name].get(key)
                )
        stream = props.get("StreamSpecification")
        if stream:
            actual_stream = table.get("StreamSpecification", {})
            found += _differences(
                "StreamSpecification.StreamViewType",
                stream["StreamViewType"],
                actual_stream.get("StreamViewType", "<absent>"),
            )
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            actual_ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            expected_status = "ENABLED" if ttl.get("Enabled") else "DISABLED"
            found += _differences(
                "TimeToLiveSpecification.Enabled", expected_status, actual_ttl.get("TimeToLiveStatus", "<absent>")
            )
            found += _differences(
                "TimeToLiveSpecification.AttributeName",
                ttl["AttributeName"],
                actual_ttl.get("AttributeName", "<absent>"),
            )
        pitr = props.get("PointInTimeRecoverySpecification")
        if pitr and pitr.get("PointInTimeRecoveryEnabled"):
            backups = dynamodb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
            status = backups.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus")
            found += _differences("PointInTimeRecoverySpecification", "ENABLED", status)
        if "DeletionProtectionEnabled" in props:
            found += _differences(
                "DeletionProtectionEnabled",
                props["DeletionProtectionEnabled"],
                table.get("DeletionProtectionEnabled", False),
            )
        return found

    def _bucket(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        s3 = self.client("s3")
        found: list[str] = []
        versioning = props.get("VersioningConfiguration")
        if versioning:
            found += _differences(
                "VersioningConfiguration.Status",
                versioning["Status"],
                s3.get_bucket_versioning(Bucket=name).get("Status", "<absent>"),
            )
        encryption = props.get("BucketEncryption")
        if encryption:
            try:
                rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
            except s3.exceptions.ClientError:
                rules = []
            expected = [
                r.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm")
                for r in encryption["ServerSideEncryptionConfiguration"]
            ]
            actual = [r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules]
            found += _differences("BucketEncryption", expected, actual)
        block = props.get("PublicAccessBlockConfiguration")
        if block:
            try:
                actual_block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
            except s3.exceptions.ClientError:
                actual_block = {}
            found += _differences("PublicAccessBlockConfiguration", block, actual_block)
        cors = props.get("CorsConfiguration")
        if cors:
            try:
                actual_rules = s3.get_bucket_cors(Bucket=name)["CORSRules"]
            except s3.exceptions.ClientError:
                actual_rules = []
            found += _differences(
                "CorsConfiguration.CorsRules",
                [
                    {"AllowedMethods": r["AllowedMethods"], "AllowedOrigins": r["AllowedOrigins"]}
                    for r in cors["CorsRules"]
                ],
                actual_rules,
            )
        lifecycle = props.get("LifecycleConfiguration")
        if lifecycle:
            try:
                actual_lifecycle = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
            except s3.exceptions.ClientError:
                actual_lifecycle = []
            found += _differences("LifecycleConfiguration.Rules", len(lifecycle["Rules"]), len(actual_lifecycle))
        return found

    def _notifications(self, resource: TemplateResource, physical_id: str, props: dict[str, Any]) -> list[str]:
        actual = self.client("s3").get_bucket_notification_configuration(Bucket=props["BucketName"])
        expected = props.get("NotificationConfiguration", {})
        found: list[str] = []
        for kind in ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations"):
            for index, entry in enumerate(expected.get(kind, [])):
                actual_entries = actual.get(kind, [])
                if index >= len(actual_entries):
                    found.append(f"NotificationConfiguration.{kind}[{index}] missing")
                    continue
                arn_key = {"QueueConfigurations": "QueueArn", "TopicConfigurations": "TopicArn"}.get(
                    kind, "LambdaFunctionArn"
                )
                found += _differences(f"{kind}[{index}].Events", entry["Events"], actual_entries[index]["Events"])
                found += _differences(f"{kind}[{index}].{arn_key}", entry[arn_key], actual_entries[index][arn_key])
        return found

    def _function(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        lambda_client = self.client("lambda")
        config = lambda_client.get_function_configuration(FunctionName=name)
        found: list[str] = []
        for key, default in (("Handler", None), ("Runtime", None), ("Timeout", 3), ("MemorySize", 128)):
            if key in props or default is not None:
                found += _differences(key, props.get(key, default), config.get(key, "<absent>"))
        variables = (props.get("Environment") or {}).get("Variables") or {}
        found += _differences(
            "Environment.Variables",
            {k: str(v) for k, v in variables.items()},
            config.get("Environment", {}).get("Variables", {}),
        )
        if props.get("Layers"):
            found += _differences("Layers", len(props["Layers"]), len(config.get("Layers", [])))
        if "ReservedConcurrentExecutions" in props:
            reserved = lambda_client.get_function_concurrency(FunctionName=name).get(
                "ReservedConcurrentExecutions", "<absent>"
            )
            found += _differences("ReservedConcurrentExecutions", props["ReservedConcurrentExecutions"], reserved)
        if props.get("DeadLetterConfig"):
            found += _differences("DeadLetterConfig", props["DeadLetterConfig"], config.get("DeadLetterConfig", {}))
        if props.get("LoggingConfig"):
            found += _differences("LoggingConfig", props["LoggingConfig"], config.get("LoggingConfig", {}))
        return found

    def _mapping(self, resource: TemplateResource, uuid: str, props: dict[str, Any]) -> list[str]:
        mapping = self.client("lambda").get_event_source_mapping(UUID=uuid)
        found = _differences("EventSourceArn", props["EventSourceArn"], mapping.get("EventSourceArn", "<absent>"))
        for key in (
            "BatchSize",
            "MaximumBatchingWindowInSeconds",
            "FunctionResponseTypes",
            "ScalingConfig",
            "StartingPosition",
            "FilterCriteria",
        ):
            if key in props:
                found += _differences(key, props[key], mapping.get(key, "<absent>"))
        return found

    def _state_machine(self, resource: TemplateResource, arn: str, props: dict[str, Any]) -> list[str]:
        stepfunctions = self.client("stepfunctions")
        machines = [m["stateMachineArn"] for m in stepfunctions.list_state_machines()["stateMachines"]]
        if arn not in machines:
            return [f"the stack's physical id {arn} is not a state machine in moto (it has {machines})"]
        described = stepfunctions.describe_state_machine(stateMachineArn=arn)
        expected = json.loads(props["DefinitionString"]) if "DefinitionString" in props else props.get("Definition")
        found = _differences("Definition", expected, json.loads(described["definition"]))
        if "LoggingConfiguration" in props:
            found += _differences(
                "LoggingConfiguration.Level",
                props["LoggingConfiguration"].get("Level"),
                described.get("loggingConfiguration", {}).get("level", "<absent>"),
            )
        if "TracingConfiguration" in props:
            found += _differences(
                "TracingConfiguration.Enabled",
                props["TracingConfiguration"].get("Enabled"),
                described.get("tracingConfiguration", {}).get("enabled", "<absent>"),
            )
        return found

    def _alarm(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        alarms = self.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
        if not alarms:
            return [f"alarm {name} not found"]
        alarm = alarms[0]
        found: list[str] = []
        for key in (
            "MetricName",
            "Namespace",
            "Statistic",
            "Period",
            "EvaluationPeriods",
            "DatapointsToAlarm",
            "Threshold",
            "ComparisonOperator",
            "TreatMissingData",
            "AlarmActions",
            "OKActions",
            "ActionsEnabled",
        ):
            if key in props:
                found += _differences(key, props[key], alarm.get(key, "<absent>"))
        if "Dimensions" in props:
            found += _differences(
                "Dimensions",
                sorted(props["Dimensions"], key=lambda d: d["Name"]),
                sorted(alarm.get("Dimensions", []), key=lambda d: d["Name"]),
            )
        if "Metrics" in props:
            found += _differences("Metrics", props["Metrics"], alarm.get("Metrics", "<absent>"))
        return found

    def _topic(self, resource: TemplateResource, arn: str, props: dict[str, Any]) -> list[str]:
        attributes = self.client("sns").get_topic_attributes(TopicArn=arn)["Attributes"]
        return (
            _differences("KmsMasterKeyId", props["KmsMasterKeyId"], attributes.get("KmsMasterKeyId", "<absent>"))
            if "KmsMasterKeyId" in props
            else []
        )

    def _role(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        role = self.client("iam").get_role(RoleName=name)["Role"]
        found = _differences(
            "AssumeRolePolicyDocument", props["AssumeRolePolicyDocument"], role["AssumeRolePolicyDocument"]
        )
        if props.get("ManagedPolicyArns"):
            attached = self.client("iam").list_attached_role_policies(RoleName=name)["AttachedPolicies"]
            found += _differences(
                "ManagedPolicyArns", sorted(props["ManagedPolicyArns"]), sorted(p["PolicyArn"] for p in attached)
            )
        return found

    def _rule(self, resource: TemplateResource, physical_id: str, props: dict[str, Any]) -> list[str]:
        name = physical_id.rsplit("/", 1)[-1].split("|")[-1]
        rule = self.client("events").describe_rule(Name=name)
        found = (
            _differences("ScheduleExpression", props["ScheduleExpression"], rule.get("ScheduleExpression", "<absent>"))
            if "ScheduleExpression" in props
            else []
        )
        targets = self.client("events").list_targets_by_rule(Rule=name)["Targets"]
        return found + _differences("Targets", len(props.get("Targets", [])), len(targets))

    def _log_group(self, resource: TemplateResource, name: str, props: dict[str, Any]) -> list[str]:
        groups = self.client("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        group = next((g for g in groups if g["logGroupName"] == name), None)
        if group is None:
            return [f"log group {name} not found"]
        return (
            _differences("RetentionInDays", props["RetentionInDays"], group.get("retentionInDays", "<absent>"))
            if "RetentionInDays" in props
            else []
        )

    def _layer(self, resource: TemplateResource, arn: str, props: dict[str, Any]) -> list[str]:
        layers = self.client("lambda").list_layers()["Layers"]
        matching = [layer for layer in layers if arn and layer["LayerArn"] in arn]
        if not matching:
            names = [layer["LayerName"] for layer in layers]
            return [f"the stack's physical id {arn!r} names none of moto's layers {names}"]
        latest = matching[0]["LatestMatchingVersion"]
        return _differences(
            "CompatibleRuntimes", props.get("CompatibleRuntimes", []), latest.get("CompatibleRuntimes", [])
        )


# -- the measurement ------------------------------------------------------------------------------


def measure(settings: RuntimeSettings) -> list[Finding]:
    template = CloudFormationTemplate.load(settings.template_path)
    supported = supported_types()
    body, unsupported = measurement_template(template, supported)
    configure_moto(settings.moto_port)
    server = start_moto_server(settings.host, settings.moto_port)
    undo_custom_resources = answer_custom_resources(settings)
    try:
        upload_assets(settings, settings.template_path.parent, settings.stack_name)
        cloudformation = moto_client(settings, "cloudformation", read_timeout=600)
        with CreationRecorder() as recorder, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cloudformation.create_stack(
                StackName=settings.stack_name,
                TemplateBody=json.dumps(body),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
            )
            threading.Event().wait(1.0)  # custom resources answer from a thread of moto's
            # Reading the stack back may create resources lazily: still recorded, never fatal.
            from moto.cloudformation import cloudformation_backends

            stack = next(iter(cloudformation_backends[settings.account_id][settings.region].stacks.values()))
            resolver = IntrinsicResolver(
                template, region=settings.region, account_id=settings.account_id, stack_name=settings.stack_name
            )
            physical_ids = {
                summary["LogicalResourceId"]: summary.get("PhysicalResourceId", "")
                for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=settings.stack_name)
                for summary in page["StackResourceSummaries"]
            }
            models: dict[str, Any] = {}
            for logical_id in template.resources:
                model = stack.resource_map._parsed_resources.get(logical_id)
                if model is not None:
                    models[logical_id] = model
                    resolver.set_resource(logical_id, physical_ids.get(logical_id, ""), _MotoAttributes(model))
                else:
                    resolver.set_resource(logical_id, f"placeholder-{logical_id}", _PlaceholderAttributes(logical_id))
            checker = Checker(settings, resolver)
            findings: list[Finding] = []
            for logical_id, resource in template.resources.items():
                if logical_id in unsupported:
                    findings.append(Finding(logical_id, resource.type, "not supported"))
                elif logical_id in recorder.errors or logical_id not in models:
                    error = recorder.errors.get(logical_id, "not created")
                    findings.append(Finding(logical_id, resource.type, "failed", [error]))
                else:
                    differences = checker.check(resource, str(physical_ids.get(logical_id, "")))
                    if differences is None:
                        findings.append(Finding(logical_id, resource.type, "not checked"))
                    elif differences:
                        findings.append(Finding(logical_id, resource.type, "created, wrong", differences))
                    else:
                        findings.append(Finding(logical_id, resource.type, "created"))
            return findings
    finally:
        undo_custom_resources()
        server.stop()


def summary(findings: list[Finding]) -> dict[str, dict[str, Any]]:
    """Per resource type: how many of each verdict, and the distinct differences found."""
    per_type: dict[str, dict[str, Any]] = {}
    for finding in findings:
        entry = per_type.setdefault(finding.resource_type, {"count": 0, "verdicts": {}, "details": []})
        entry["count"] += 1
        entry["verdicts"][finding.verdict] = entry["verdicts"].get(finding.verdict, 0) + 1
        for detail in finding.detail:
            text = f"{finding.logical_id}: {detail}"
            if text not in entry["details"]:
                entry["details"].append(text)
    return dict(sorted(per_type.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="every finding as JSON")
    arguments = parser.parse_args()
    # Its own moto server on a free port: a running local stack is left alone.
    settings = RuntimeSettings.from_env({**os.environ, "LOCAL_MOTO_PORT": str(_free_port())})
    findings = measure(settings)
    if arguments.json:
        # moto prints warnings on stdout: the JSON document starts at the first "{" line.
        print(json.dumps({"summary": summary(findings), "findings": [f.__dict__ for f in findings]}, indent=2))
        return 0
    for resource_type, entry in summary(findings).items():
        verdicts = ", ".join(f"{count} {verdict}" for verdict, count in entry["verdicts"].items())
        print(f"{resource_type} ({entry['count']}): {verdicts}")
        for detail in entry["details"][:6]:
            print(f"    {detail}")
        if len(entry["details"]) > 6:
            print(f"    ... {len(entry['details']) - 6} more")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
