"""Physical names that survive ``cdk destroy`` must not collide with the next deploy.

A resource kept by ``removalPolicy: retain`` still holds its name after the stack is gone, so a
fixed name (``ragingest-search``) makes the next deploy of the same stack fail with "already
exists". Names CDK cannot leave to CloudFormation (the OpenSearch domain's, which its own access
policy must spell; the state machine's log group, which must sit under ``/aws/vendedlogs/``) get
a suffix unique to one creation of the stack: the first group of the stack id's UUID.
"""

from __future__ import annotations

from aws_cdk import Aws, Fn

# 8 lowercase hex characters, fixed for the life of a stack, new for every re-creation.
SUFFIX_LENGTH = 8


def stack_instance_suffix() -> str:
    """A token: the first group of the UUID in ``AWS::StackId`` (``.../stack/<name>/<uuid>``)."""
    return Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))))


def unique_name(prefix: str) -> str:
    """``<prefix><suffix>``: a token that resolves to a name unique to this stack's creation."""
    return Fn.join("", [prefix, stack_instance_suffix()])


# CloudFront's OAC names allow 64 characters; the response headers policy's 128.
_ACCOUNT_GLOBAL_STACK_CHARS = 28


def account_global_name(stack_name: str, purpose: str) -> str:
    """A name for a resource whose names are unique per *account*, across regions (CloudFront's
    response headers policies and origin access controls): ``<stack>-<region>-<suffix>-<purpose>``.

    CDK's default is built from the construct path alone, the same in every region, so the same
    stack deployed to a second region fails with "already exists". At most 57 characters.
    """
    if len(purpose) > 7:
        raise ValueError(f"purpose {purpose!r}: at most 7 characters (CloudFront's 64-character limit)")
    start = f"{stack_name[:_ACCOUNT_GLOBAL_STACK_CHARS]}-"
    return Fn.join("", [start, Aws.REGION, "-", stack_instance_suffix(), f"-{purpose}"])
