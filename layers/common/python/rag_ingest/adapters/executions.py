"""Step Functions: what became of an execution (the reaper compares it with the status record)."""

from __future__ import annotations

from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.operations import ExecutionState
from rag_ingest.core.tracing import traced

_MISSING_CODES = frozenset({"ExecutionDoesNotExist", "InvalidArn"})


@traced
class Executions:
    def __init__(self, sfn_client: Any | None = None) -> None:
        self._sfn = sfn_client if sfn_client is not None else client("stepfunctions")

    def state(self, execution_arn: str | None) -> ExecutionState:
        if not execution_arn:
            return ExecutionState.MISSING
        with translated("describe execution", expect=_MISSING_CODES) as refusal:
            response = self._sfn.describe_execution(executionArn=execution_arn)
        if refusal.refused:
            return ExecutionState.MISSING
        return ExecutionState(str(response["status"]))
