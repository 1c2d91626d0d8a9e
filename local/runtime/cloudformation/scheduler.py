"""``AWS::Scheduler::ScheduleGroup`` in moto: the group sources' schedules are created in. moto keeps
schedules but never runs them (docs/local-stack.md): locally a sync starts on request only."""

from __future__ import annotations

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.template import TemplateResource


def create_schedule_group(resource: TemplateResource, context: ProvisioningContext) -> None:
    name = str(context.properties(resource)["Name"])
    arn = context.client("scheduler").create_schedule_group(Name=name)["ScheduleGroupArn"]
    context.created(resource, name, {"Arn": arn})
