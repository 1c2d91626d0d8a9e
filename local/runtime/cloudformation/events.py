"""``AWS::Events::EventBus`` and the rules moto's EventBridge can deliver: event patterns to queues.

A rule whose targets are all queues of the stack (the webhooks' fan-out) is created; schedules
and rules with other targets are skipped (:func:`is_queue_rule` tells them apart).
"""

from __future__ import annotations

import json

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.provisioned import ProvisioningError
from local.runtime.cloudformation.template import CloudFormationTemplate, TemplateResource


def create_event_bus(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    name = str(props["Name"])
    arn = context.client("events").create_event_bus(Name=name)["EventBusArn"]
    context.created(resource, name, {"Arn": arn, "Name": name})


def is_queue_rule(resource: TemplateResource, template: CloudFormationTemplate) -> bool:
    """An event-pattern rule whose targets are all SQS queues of the template."""
    props = resource.properties
    targets = props.get("Targets") or []
    if "EventPattern" not in props or "ScheduleExpression" in props or not targets:
        return False
    for target in targets:
        arn = target.get("Arn") if isinstance(target, dict) else None
        get_att = arn.get("Fn::GetAtt") if isinstance(arn, dict) else None
        if not (isinstance(get_att, list) and len(get_att) == 2 and get_att[1] == "Arn"):
            return False
        queue = template.resources.get(str(get_att[0]))
        if queue is None or queue.type != "AWS::SQS::Queue":
            return False
    return True


def create_rule(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    name = context.physical_name(resource, "Name", 64)
    bus = str(props.get("EventBusName") or "default")
    pattern = props["EventPattern"]
    events = context.client("events")
    arn = events.put_rule(
        Name=name,
        EventBusName=bus,
        EventPattern=pattern if isinstance(pattern, str) else json.dumps(pattern),
        State=str(props.get("State") or "ENABLED"),
    )["RuleArn"]
    targets = [{"Id": str(target["Id"]), "Arn": str(target["Arn"])} for target in props["Targets"]]
    for target in targets:
        if target["Arn"] not in context.queue_urls_by_arn:
            raise ProvisioningError(f"rule {resource.logical_id}: target {target['Arn']} is no queue of the stack")
    events.put_targets(Rule=name, EventBusName=bus, Targets=targets)
    context.created(resource, name, {"Arn": arn})
