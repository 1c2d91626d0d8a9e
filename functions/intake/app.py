"""SQS consumer: S3 upload events → QUEUED documents and named workflow executions.

Partial batch failures: a bad record is reported and retried (then DLQ'd) alone.
Idempotent per object version (bucket + key + version), not per message id: S3 may emit two
events for one object, and SQS may deliver one message twice.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import IntakeEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.documents.intake import UploadedObject, parse_queue_message
from rag_ingest.wiring import build_intake

ENV = IntakeEnv.from_env()
processor = BatchProcessor(event_type=EventType.SQS)
idempotency_config = IdempotencyConfig(
    event_key_jmespath="[bucket, key, version]",
    expires_after_seconds=ENV.idempotency_ttl_seconds,
    raise_on_no_idempotency_key=True,
)
persistence = DynamoDBPersistenceLayer(table_name=ENV.idempotency_table)
service = build_intake(ENV)


@idempotent_function(data_keyword_argument="uploaded", persistence_store=persistence, config=idempotency_config)
def ingest_once(uploaded: UploadedObject) -> dict[str, Any]:
    return service.ingest(uploaded).model_dump()


def record_handler(record: SQSRecord) -> list[dict[str, Any]]:
    return [ingest_once(uploaded=uploaded) for uploaded in parse_queue_message(record.body)]


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    idempotency_config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
