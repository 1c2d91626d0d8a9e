"""Redrive: move dead-lettered messages back to the ingest queue (invoke with a RedriveRequest)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.adapters.queues import Queues
from rag_ingest.config import RedriveEnv
from rag_ingest.redrive import RedriveRequest, redrive

ENV = RedriveEnv.from_env()
logger = Logger()
queues = Queues()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = RedriveRequest.model_validate(event or {})
    return redrive(queues, dlq_url=ENV.dlq_url, queue_url=ENV.queue_url, request=request).model_dump()
