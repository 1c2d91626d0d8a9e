"""Step Functions: start one execution per document version (named, so starts are idempotent)."""

from __future__ import annotations

import json
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.tracing import traced


@traced
class WorkflowStarter:
    def __init__(self, state_machine_arn: str, sfn_client: Any | None = None) -> None:
        self._state_machine_arn = state_machine_arn
        self._sfn = sfn_client if sfn_client is not None else client("stepfunctions")

    def execution_arn(self, name: str) -> str:
        # arn:aws:states:region:account:stateMachine:NAME → ...:execution:NAME:EXECUTION
        prefix, _, machine = self._state_machine_arn.rpartition(":stateMachine:")
        return f"{prefix}:execution:{machine}:{name}"

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the named execution; returns (execution ARN, started now?)."""
        with translated("start execution", expect={"ExecutionAlreadyExists"}) as refusal:
            response = self._sfn.start_execution(
                stateMachineArn=self._state_machine_arn, name=name, input=json.dumps(payload)
            )
        if refusal.refused:
            return self.execution_arn(name), False
        return str(response["executionArn"]), True
