"""Create the template's resources in moto, each by the provisioner of its type (:data:`PROVISIONERS`).

Nothing here holds a second copy of a resource setting: every property is read from the
synthesized template. In: a :class:`CloudFormationTemplate` and the runtime settings. Out: a
:class:`ProvisionedStack` (functions, queue mappings, API routes, localised outputs, what was
skipped and why, in ``provisioned`` and ``skipped``); the per-service modules beside it
(``s3``, ``sqs``, ``dynamodb``, ``lambda_``, ...) create the resources. Why moto's
own CloudFormation is not used: docs/local-stack.md, "What is ours, and why".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from local.runtime.cloudformation import dynamodb, events, iam, lambda_, s3, scheduler, sqs, stepfunctions
from local.runtime.cloudformation.apigateway import read_api_routes
from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.provisioned import (
    ProvisionedStack,
    ProvisioningError,
)
from local.runtime.cloudformation.skipped import (
    PlaceholderAttributes,
    placeholder_ref,
    skip_reason,
)
from local.runtime.cloudformation.template import (
    CloudFormationTemplate,
    IntrinsicResolver,
    TemplateError,
    TemplateResource,
    dependency_order,
)
from local.runtime.settings import LIVE_PATH, RuntimeSettings

ResourceProvisioner = Callable[[TemplateResource, ProvisioningContext], None]

# CloudFormation type -> what creates a resource of it in moto.
PROVISIONERS: dict[str, ResourceProvisioner] = {
    "AWS::IAM::Role": iam.create_role,
    "AWS::S3::Bucket": s3.create_bucket,
    "Custom::S3BucketNotifications": s3.apply_bucket_notifications,
    "AWS::SQS::Queue": sqs.create_queue,
    "AWS::DynamoDB::Table": dynamodb.create_table,
    "AWS::DynamoDB::GlobalTable": dynamodb.create_table,
    "AWS::Events::EventBus": events.create_event_bus,
    "AWS::Events::Rule": events.create_rule,
    "AWS::Lambda::Function": lambda_.create_function,
    "AWS::StepFunctions::StateMachine": stepfunctions.create_state_machine,
    "AWS::Scheduler::ScheduleGroup": scheduler.create_schedule_group,
}

_API_DOMAIN = re.compile(r"^https://[^/]+\.execute-api\.[^/]+\.amazonaws\.com(?P<path>/.*)?$")
_WEBSOCKET_DOMAIN = re.compile(r"^wss://[^/]+\.execute-api\.[^/]+\.amazonaws\.com(/.*)?$")
_CLOUDFRONT_DOMAIN = re.compile(r"^https://[^/]+\.cloudfront\.net(?P<path>/.*)?$")
_OPENSEARCH_DOMAIN = re.compile(r"^(https://)?[^/]+\.es\.amazonaws\.com(?P<path>/.*)?$")


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
        self.context = ProvisioningContext(template, settings, self.resolver, self.stack)

    def provision(self) -> ProvisionedStack:
        present = [
            r for r in self.template.resources.values() if r.condition is None or self.resolver.condition(r.condition)
        ]
        custom_resource_functions = lambda_.custom_resource_provider_functions(present)
        region, account_id = self.settings.region, self.settings.account_id
        to_create: list[str] = []
        for resource in present:
            reason = self._skip_reason(resource, custom_resource_functions)
            if reason is None:
                to_create.append(resource.logical_id)
                continue
            self.stack.skipped.setdefault(f"{resource.type} ({reason})", []).append(resource.logical_id)
            self.resolver.set_resource(
                resource.logical_id,
                placeholder_ref(resource, region, account_id),
                PlaceholderAttributes(resource, region, account_id),
            )
        for logical_id in dependency_order(self.template, to_create):
            resource = self.template.resources[logical_id]
            try:
                PROVISIONERS[resource.type](resource, self.context)
            except TemplateError as exc:
                raise type(exc)(f"{resource.type} {logical_id}: {exc}") from exc
            except ProvisioningError:
                raise
            except Exception as exc:
                raise ProvisioningError(f"creating {resource.type} {logical_id} in moto failed: {exc}") from exc
        self.stack.event_source_mappings = [
            lambda_.read_event_source_mapping(resource, self.context)
            for resource in present
            if resource.type == "AWS::Lambda::EventSourceMapping" and not lambda_.is_stream_mapping(resource)
        ]
        self.stack.api_routes = read_api_routes(present, self.context)
        self.stack.outputs = self._resolve_outputs()
        return self.stack

    def _skip_reason(self, resource: TemplateResource, custom_resource_functions: set[str]) -> str | None:
        return skip_reason(resource, self.template, PROVISIONERS, custom_resource_functions)

    def _is_stream_mapping(self, resource: TemplateResource) -> bool:
        return lambda_.is_stream_mapping(resource)

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
        if _WEBSOCKET_DOMAIN.match(value):  # the live-status WebSocket API becomes the local one
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
