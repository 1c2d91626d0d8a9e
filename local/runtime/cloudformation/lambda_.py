"""``AWS::Lambda::Function`` in moto, and the template's SQS event source mappings, read for the poller.

moto keeps a placeholder package; the local Lambda runner runs the CDK asset directory with the
template's handler, timeout, memory and environment (:class:`FunctionDefinition`). Only Python
functions with a code asset run; stream mappings and custom resource providers are skipped.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Iterable
from typing import Any

from local.runtime.cloudformation.context import ProvisioningContext, attribute_text
from local.runtime.cloudformation.provisioned import EventSourceMapping, FunctionDefinition, ProvisioningError
from local.runtime.cloudformation.template import CloudFormationTemplate, TemplateResource

LOG = logging.getLogger("local.runtime.cloudformation.provision")

_LAMBDA_ARN_IN_URI = re.compile(r"arn:aws[a-z-]*:lambda:[^:]+:\d+:function:([A-Za-z0-9_-]+)")


def function_name_of(value: Any) -> str:
    """A function's name from its name, its ARN or an integration URI that holds its ARN."""
    text = str(value)
    match = _LAMBDA_ARN_IN_URI.search(text)
    return match.group(1) if match else text


def custom_resource_provider_functions(resources: Iterable[TemplateResource]) -> set[str]:
    """Logical ids of the functions that serve custom resources (their ``ServiceToken``)."""
    providers: set[str] = set()
    for resource in resources:
        if resource.type.startswith("Custom::") or resource.type == "AWS::CloudFormation::CustomResource":
            token = resource.properties.get("ServiceToken")
            if isinstance(token, dict) and "Fn::GetAtt" in token:
                target = token["Fn::GetAtt"]
                providers.add(target.split(".")[0] if isinstance(target, str) else target[0])
    return providers


def function_skip_reason(
    resource: TemplateResource, template: CloudFormationTemplate, custom_resource_functions: set[str]
) -> str | None:
    """Why the runner cannot run this function locally; None when it can."""
    if resource.logical_id in custom_resource_functions:
        return "custom resource provider: does not run locally"
    runtime = str(resource.properties.get("Runtime", ""))
    if not runtime.startswith("python"):
        return f"runtime {runtime or 'container image'}: the local runner runs Python only"
    if template.asset_dir(resource) is None:
        return "no CDK code asset: inline or external code does not run locally"
    return None


def create_function(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    name = context.physical_name(resource, "FunctionName", 64)
    handler = str(props.get("Handler", ""))
    code_dir = context.template.asset_dir(resource)
    if code_dir is None or not code_dir.is_dir():
        raise ProvisioningError(f"function {resource.logical_id}: code asset dir {code_dir} not found")
    module_path = handler.rpartition(".")[0].replace(".", "/")
    if not module_path or not (code_dir / f"{module_path}.py").is_file():
        raise ProvisioningError(f"function {resource.logical_id}: handler {handler!r} has no module file in {code_dir}")
    environment = {
        key: attribute_text(value) for key, value in ((props.get("Environment") or {}).get("Variables") or {}).items()
    }
    timeout = int(props.get("Timeout", 3))
    memory = int(props.get("MemorySize", 128))
    arn = context.client("lambda").create_function(
        FunctionName=name,
        Runtime=props["Runtime"],
        Role=props["Role"],
        Handler=handler,
        Code={"ZipFile": _placeholder_package()},
        Timeout=timeout,
        MemorySize=memory,
        Environment={"Variables": environment},
        Description=str(props.get("Description", ""))[:256],
    )["FunctionArn"]
    reserved = props.get("ReservedConcurrentExecutions")
    context.stack.functions.append(
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
            tags={str(tag["Key"]): attribute_text(tag["Value"]) for tag in props.get("Tags") or []},
        )
    )
    context.created(resource, name, {"Arn": arn})


def _placeholder_package() -> bytes:
    # moto wants a code package; the runner runs the real code from the asset dir.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "Local stack placeholder: the local Lambda runner runs the CDK asset.\n")
    return buffer.getvalue()


def is_stream_mapping(resource: TemplateResource) -> bool:
    """An event source mapping on a DynamoDB stream (``Fn::GetAtt [Table, StreamArn]`` or a stream ARN)."""
    source = resource.properties.get("EventSourceArn")
    if isinstance(source, dict) and "Fn::GetAtt" in source:
        target = source["Fn::GetAtt"]
        attribute = target[1] if isinstance(target, list) else str(target).partition(".")[2]
        return attribute == "StreamArn"
    return isinstance(source, str) and ":dynamodb:" in source and "/stream/" in source


def read_event_source_mapping(resource: TemplateResource, context: ProvisioningContext) -> EventSourceMapping:
    """An SQS mapping as the local poller runs it; its queue must be one the stack created."""
    props = context.properties(resource)
    source_arn = str(props.get("EventSourceArn", ""))
    if source_arn not in context.queue_urls_by_arn:
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
        queue_url=context.queue_urls_by_arn[source_arn],
        function_name=function_name_of(props["FunctionName"]),
        batch_size=int(props.get("BatchSize", 10)),
        batching_window_seconds=int(props.get("MaximumBatchingWindowInSeconds", 0)),
        report_batch_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
        maximum_concurrency=int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None,
        enabled=bool(props.get("Enabled", True)),
    )
