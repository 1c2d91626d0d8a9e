"""``AWS::IAM::Role`` in moto: the role exists for the ARNs that name it; moto enforces no policy."""

from __future__ import annotations

import json

from local.runtime.cloudformation.context import ProvisioningContext
from local.runtime.cloudformation.template import TemplateResource


def create_role(resource: TemplateResource, context: ProvisioningContext) -> None:
    props = context.properties(resource)
    name = context.physical_name(resource, "RoleName", 64)
    role = context.client("iam").create_role(
        RoleName=name,
        Path=props.get("Path", "/"),
        AssumeRolePolicyDocument=json.dumps(props.get("AssumeRolePolicyDocument", {})),
    )["Role"]
    context.created(resource, name, {"Arn": role["Arn"], "RoleId": role["RoleId"]})
