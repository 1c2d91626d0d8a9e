"""Where a deployed stack's resources are, for operator tooling run outside Lambda (the CLI).

In AWS: the CloudFormation stack's outputs. Locally: the local stack's ``outputs.json``
(``.local/runtime/outputs.json``), whose ``MotoEndpoint`` every client is pointed at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from rag_ingest.adapters.aws import BOTO_CONFIG

# The local stack writes its outputs here (local.runtime.settings: state_dir / LOCAL_OUTPUTS.name); the CLI,
# run from the repository, reads them from here by default.
LOCAL_OUTPUTS = Path(".local/runtime/outputs.json")
# moto accepts any credentials; the local stack's own clients use these.
_LOCAL_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class StackResourcesError(RuntimeError):
    """The stack (or the local stack) cannot be found, or lacks an output the tooling needs."""


@dataclass(frozen=True)
class StackResources:
    documents_table: str
    dead_letter_queue_url: str
    ingest_queue_url: str
    state_machine_arn: str
    region: str | None = None
    endpoint_url: str | None = None  # moto's, for the local stack
    # The Reconciler function (ReconcilerFunctionName): `rag-ingest reconcile` invokes it.
    reconciler_function: str | None = None

    @classmethod
    def from_outputs(
        cls, outputs: dict[str, Any], *, region: str | None, endpoint_url: str | None = None
    ) -> StackResources:
        wanted = {
            "documents_table": "DocumentsTableName",
            "dead_letter_queue_url": "DeadLetterQueueUrl",
            "ingest_queue_url": "IngestQueueUrl",
            "state_machine_arn": "StateMachineArn",
        }
        missing = [output for output in wanted.values() if not outputs.get(output)]
        if missing:
            raise StackResourcesError(f"stack outputs lack {', '.join(missing)}")
        return cls(
            **{field: str(outputs[output]) for field, output in wanted.items()},
            region=region,
            endpoint_url=endpoint_url,
            reconciler_function=outputs.get("ReconcilerFunctionName") or None,
        )

    def client(self, service: str) -> Any:
        return self._session().client(service, endpoint_url=self.endpoint_url, config=BOTO_CONFIG)

    def slow_client(self, service: str, read_timeout: int) -> Any:
        """A client for one long call (a function run synchronously): no retries, a long read timeout."""
        config = BOTO_CONFIG.merge(Config(read_timeout=read_timeout, retries={"max_attempts": 1}))
        return self._session().client(service, endpoint_url=self.endpoint_url, config=config)

    def resource(self, service: str) -> Any:
        return self._session().resource(service, endpoint_url=self.endpoint_url, config=BOTO_CONFIG)

    def _session(self) -> boto3.Session:
        credentials = _LOCAL_CREDENTIALS if self.endpoint_url else {}
        return boto3.Session(region_name=self.region, **credentials)


def local_stack(outputs_path: Path = LOCAL_OUTPUTS) -> StackResources:
    if not outputs_path.is_file():
        raise StackResourcesError(f"{outputs_path} not found: start the local stack first (make stack-up)")
    outputs = json.loads(outputs_path.read_text())
    endpoint = outputs.get("MotoEndpoint")
    if not endpoint:
        raise StackResourcesError(f"{outputs_path} has no MotoEndpoint")
    return StackResources.from_outputs(outputs, region=outputs.get("Region", "us-east-1"), endpoint_url=endpoint)


def stack_outputs(stack_name: str, region: str | None = None) -> tuple[dict[str, str], str | None]:
    """A deployed stack's outputs (``OutputKey`` → ``OutputValue``) and the region it was read in."""
    session = boto3.Session(region_name=region)
    try:
        stacks = session.client("cloudformation", config=BOTO_CONFIG).describe_stacks(StackName=stack_name)["Stacks"]
    except Exception as exc:  # credentials, region, missing stack: all end the command the same way
        raise StackResourcesError(f"cannot read stack {stack_name}: {exc}") from exc
    outputs = {item["OutputKey"]: item["OutputValue"] for item in stacks[0].get("Outputs", [])}
    return outputs, session.region_name


def deployed_stack(stack_name: str, region: str | None = None) -> StackResources:
    outputs, region_name = stack_outputs(stack_name, region)
    return StackResources.from_outputs(outputs, region=region_name)
