"""cdk-nag v3 acknowledgments: every one carries a written reason.

cdk-nag v3 drops ``NagSuppressions`` for CDK's native ``Validations.of(scope).acknowledge``, and
each finding of a rule must be acknowledged by its exact id (``AwsSolutions-IAM5[Resource::*]``),
so a new wildcard shows up as a new finding instead of hiding under an old suppression.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, *findings: str) -> None:
    """Acknowledge ``rule`` on ``scope`` and its children, for each finding (or the rule itself)."""
    ids = [f"{rule}[{finding}]" for finding in findings] or [rule]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=rule_id, reason=reason) for rule_id in ids))


def arn_ref(element: IConstruct, attribute: str = "Arn") -> str:
    """How cdk-nag spells a ``Fn::GetAtt`` in a finding id, e.g. ``<DocumentsBucket9EC9DEB9.Arn>``."""
    cfn = element if isinstance(element, CfnElement) else element.node.default_child
    if not isinstance(cfn, CfnElement):
        raise TypeError(f"{element.node.path} has no CloudFormation resource")
    return f"<{Stack.of(cfn).get_logical_id(cfn)}.{attribute}>"
