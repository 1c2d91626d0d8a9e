"""Documents-table stream consumer: each changed document goes to its tenant's WebSocket connections.

Partial batch responses: a record that fails is reported, and the event source mapping retries
from it (bisecting the batch), then sends it to the on-failure destination.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.adapters.live_connections import DynamoConnectionStore, ManagementApiPoster
from rag_ingest.core.config import LivePusherEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.live.connections import LivePusher

ENV = LivePusherEnv.from_env()
# Every failure is reported as a batch item failure, even when all records fail, so the mapping
# always retries from the first failed record rather than the whole batch.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
pusher = LivePusher(
    store=DynamoConnectionStore(ENV.connections_table),
    poster=ManagementApiPoster(ENV.websocket_callback_url),
    max_attempts=ENV.post_max_attempts,
    tenant_admin_group=ENV.tenant_admin_group,
)


def record_handler(record: DynamoDBRecord) -> None:
    report = pusher.push(record.dynamodb.new_image if record.dynamodb else None)
    if report.skipped_reason:
        logger.info("record skipped", extra={"document_id": report.document_id, "reason": report.skipped_reason})
    else:
        logger.debug(
            "pushed",
            extra={"document_id": report.document_id, "delivered": len(report.delivered), "gone": len(report.gone)},
        )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
