"""A deployed stack's CloudFormation outputs, for ``rag-ingest --stack NAME`` (boto3: the ``aws`` extra).

The only AWS call the user commands make: where the API and the sign-in are. boto3 is imported
when it is made, so the rest of the client works without it. May import: boto3.
"""

from __future__ import annotations

from typing import Any


class StackOutputsError(Exception):
    """The stack's outputs cannot be read (no boto3, no credentials, no such stack)."""


def stack_outputs(stack_name: str, region: str | None = None) -> tuple[dict[str, str], str | None]:
    """A deployed stack's outputs (``OutputKey`` → ``OutputValue``) and the region they were read in."""
    try:
        import boto3
    except ImportError:
        raise StackOutputsError(
            f"--stack {stack_name} reads the stack's outputs with boto3: pip install 'rag-ingest-client[aws]'"
        ) from None
    session = boto3.Session(region_name=region)
    try:
        described: Any = session.client("cloudformation").describe_stacks(StackName=stack_name)
    except Exception as exc:  # credentials, region, missing stack: all end the command the same way
        raise StackOutputsError(f"cannot read stack {stack_name}: {exc}") from exc
    outputs = {item["OutputKey"]: item["OutputValue"] for item in described["Stacks"][0].get("Outputs", [])}
    return outputs, session.region_name
