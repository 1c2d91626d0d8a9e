"""Redrive: move dead-lettered messages back to the ingest queue, or replay FAILED documents.

Invoked by an operator: ``{"action": "redrive", ...}`` (the default) or ``{"action": "replay", ...}``;
see rag_ingest.operations.redrive and rag_ingest.operations.replay for the fields and docs/operations.md for examples.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import RedriveEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.operations.redrive import parse_operator_request
from rag_ingest.wiring import build_recovery

ENV = RedriveEnv.from_env()
recovery = build_recovery(ENV)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return recovery.run(parse_operator_request(event)).model_dump(mode="json")
