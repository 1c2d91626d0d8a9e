"""cdk-nag v3 acknowledgments: every one carries a written reason.

cdk-nag v3 drops ``NagSuppressions`` for CDK's native ``Validations.of(scope).acknowledge``, and
each finding of a rule must be acknowledged by its exact id (``AwsSolutions-IAM5[Resource::*]``),
so a new wildcard shows up as a new finding instead of hiding under an old suppression.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, CfnElement, Stack, Token, Validations
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


@dataclass(frozen=True)
class PseudoSpelling:
    """How cdk-nag spells the stack's partition, region and account inside a finding id.

    Environment-agnostic (``python app.py``, the tests' default) they are tokens, spelled
    ``<AWS::Partition>``, ``<AWS::Region>``, ``<AWS::AccountId>``. ``cdk deploy`` resolves an account and
    a region, so the stack is environment-bound and the same values are literals (``aws``,
    ``eu-west-1``, ``123456789012``): an acknowledgment that wrote the token would no longer match its
    finding and the synth would fail. Build finding ids from these fields, never from literals.
    """

    partition: str
    region: str
    account: str


def pseudo_spelling(scope: IConstruct) -> PseudoSpelling:
    stack = Stack.of(scope)

    def spelled(value: str, token: str) -> str:
        return f"<{token}>" if Token.is_unresolved(value) else value

    return PseudoSpelling(
        partition=spelled(stack.partition, "AWS::Partition"),
        region=spelled(stack.region, "AWS::Region"),
        account=spelled(stack.account, "AWS::AccountId"),
    )
