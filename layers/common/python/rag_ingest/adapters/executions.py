"""Step Functions: what became of an execution (the reaper compares it with the status record)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from rag_ingest.adapters.aws import client, error_code, translate
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
        try:
            response = self._sfn.describe_execution(executionArn=execution_arn)
        except ClientError as exc:
            if error_code(exc) in _MISSING_CODES:
                return ExecutionState.MISSING
            raise translate(exc, "describe execution") from exc
        return ExecutionState(str(response["status"]))
