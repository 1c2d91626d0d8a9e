"""What every per-service provisioner is given: the template, its resolver, moto's clients, the record.

A provisioner reads a resource's resolved properties (:meth:`ProvisioningContext.properties`),
creates it in moto and calls :meth:`ProvisioningContext.created` with what ``Ref`` and
``Fn::GetAtt`` of it return from then on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local.runtime.aws import moto_client
from local.runtime.cloudformation.provisioned import ProvisionedStack
from local.runtime.cloudformation.template import (
    CloudFormationTemplate,
    IntrinsicResolver,
    TemplateResource,
    generated_physical_name,
)
from local.runtime.settings import RuntimeSettings


def attribute_text(value: Any) -> str:
    """A property value as the string an AWS API attribute takes (booleans lowercase, JSON compact)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@dataclass
class ProvisioningContext:
    template: CloudFormationTemplate
    settings: RuntimeSettings
    resolver: IntrinsicResolver
    stack: ProvisionedStack
    # The stack's queues by ARN: rule targets and event source mappings must name one of them.
    queue_urls_by_arn: dict[str, str] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = moto_client(self.settings, service)
        return self._clients[service]

    def properties(self, resource: TemplateResource) -> dict[str, Any]:
        resolved = self.resolver.resolve(dict(resource.properties))
        return resolved if isinstance(resolved, dict) else {}

    def physical_name(
        self, resource: TemplateResource, property_name: str, max_length: int, lowercase: bool = False
    ) -> str:
        """The name the template gives, else the one CloudFormation would generate."""
        explicit = resource.properties.get(property_name)
        if explicit is not None:
            return str(self.resolver.resolve(explicit))
        return generated_physical_name(
            self.settings.stack_name, resource.logical_id, max_length=max_length, lowercase=lowercase
        )

    def created(
        self, resource: TemplateResource, physical_id: Any, attributes: Mapping[str, Any] | None = None
    ) -> None:
        """``resource`` exists: its ``Ref`` is ``physical_id``, its ``Fn::GetAtt`` values ``attributes``."""
        self.resolver.set_resource(resource.logical_id, physical_id, attributes)
        self.stack.physical_ids[resource.logical_id] = physical_id
