"""Redrive: move dead-lettered messages back to the ingest queue, or replay FAILED documents.

Invoked by an operator: ``{"action": "redrive", ...}`` (the default) or ``{"action": "replay", ...}``;
see rag_ingest.redrive for the fields and docs/operations.md for examples.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.queues import Queues
from rag_ingest.adapters.workflow import WorkflowStarter
from rag_ingest.config import RedriveEnv
from rag_ingest.logs import logger
from rag_ingest.redrive import Operations, parse_operation
from rag_ingest.tracing import tracer

ENV = RedriveEnv.from_env()
operations = Operations(
    queues=Queues(),
    documents=DocumentsTable(ENV.documents_table),
    workflow=WorkflowStarter(ENV.state_machine_arn),
    dlq_url=ENV.dlq_url,
    queue_url=ENV.queue_url,
)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return operations.run(parse_operation(event)).model_dump(mode="json")
